#!/usr/bin/env bash
# Installs componentize-py (the compiler of the Python plugins) into a venv of
# its own, pinned by version and by the wheels' SHA-256
# (plugins/python/requirements-componentize-py.txt), and does nothing when it
# is already there. Silent but for errors.
#
#   scripts/ensure-componentize-py.sh            # install if needed
#   scripts/ensure-componentize-py.sh --print    # ... then print the binary's path
#   scripts/ensure-componentize-py.sh --verbose  # say what it does
#
# Where: ${AGENTD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentd/tools}/componentize-py-VERSION.
# On a machine without python3 or its venv module (Debian's python3-venv)
# it installs them with apt-get when run as root, else says what to install.
set -euo pipefail

VERSION=0.25.1
root="$(cd "$(dirname "$0")/.." && pwd)"
req="$root/plugins/python/requirements-componentize-py.txt"
tools="${AGENTD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentd/tools}"
venv="$tools/componentize-py-$VERSION"
bin="$venv/bin/componentize-py"
stamp="$venv/.agentd-requirements.sha256"

print=0 verbose=0
for arg in "$@"; do
  case "$arg" in
    --print) print=1 ;;
    --verbose|-v) verbose=1 ;;
    *) echo "usage: $0 [--print] [--verbose]" >&2; exit 2 ;;
  esac
done
say() { if [ "$verbose" = 1 ]; then echo "ensure-componentize-py: $*" >&2; fi; }

want="$(sha256sum "$req" | cut -d' ' -f1)"
installed() { [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }

# The fast path, without a lock or a python start: what makes a second call
# (every build-plugins.sh and every test binary) cost a few milliseconds.
if installed; then
  say "componentize-py $VERSION already in $venv"
  [ "$print" = 1 ] && echo "$bin"
  exit 0
fi

apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "ensure-componentize-py: needs $* (e.g. apt-get install $*)" >&2
    exit 1
  fi
  say "apt-get install $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq "$@" >/dev/null; }
}
command -v python3 >/dev/null || apt_install python3 python3-venv
# Debian splits venv's pip bootstrap (ensurepip) into python3-venv (or
# python3.X-venv): `python3 -m venv` fails without it.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  apt_install python3-venv
fi

mkdir -p "$tools"
# Concurrent callers (parallel test binaries, two builds) wait for one
# installer instead of racing in one venv; a venv cannot be built elsewhere
# and renamed into place, its scripts name their own path.
exec 9>"$tools/.componentize-py-$VERSION.lock"
flock 9
if installed; then
  [ "$print" = 1 ] && echo "$bin"
  exit 0
fi
say "installing componentize-py $VERSION into $venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  --require-hashes --no-deps --only-binary=:all: -r "$req"
"$bin" --version >/dev/null
echo "$want" >"$stamp"
say "installed $("$bin" --version)"
[ "$print" = 1 ] && echo "$bin"
exit 0
