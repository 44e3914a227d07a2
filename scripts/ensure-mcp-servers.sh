#!/usr/bin/env bash
# Installs the third-party MCP servers agentd's tests and benchmarks run,
# each pinned, and does nothing when they are already there:
#   - @modelcontextprotocol/server-everything (npm), from tests/mcp/node's
#     package.json and package-lock.json (`npm ci`: the versions and
#     integrity hashes of the lock), which needs Node.js >= 20 (its locked
#     @hono/node-server says so): installed with apt-get (Debian's nodejs and
#     npm; Debian 13 has 20) when missing, as ensure-docker.sh installs
#     Docker, as root or through passwordless sudo;
#   - the Python MCP SDK (PyPI `mcp`), from tests/mcp/requirements-mcp.txt
#     (versions and wheel hashes), in a venv of its own.
#
#   scripts/ensure-mcp-servers.sh            # install if needed
#   scripts/ensure-mcp-servers.sh --print    # ... then print two lines: the
#                                            # server-everything entry point
#                                            # and the venv's python
#   scripts/ensure-mcp-servers.sh --verbose
#
# Where: ${AGENTD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentd/tools}/mcp-*.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
tools="${AGENTD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentd/tools}"
print=0 verbose=0
for arg in "$@"; do
  case "$arg" in
    --print) print=1 ;;
    --verbose|-v) verbose=1 ;;
    *) echo "usage: $0 [--print] [--verbose]" >&2; exit 2 ;;
  esac
done
say() { if [ "$verbose" = 1 ]; then echo "ensure-mcp-servers: $*" >&2; fi; }

node_src="$root/tests/mcp/node"
node_want="$(cat "$node_src/package.json" "$node_src/package-lock.json" | sha256sum | cut -d' ' -f1)"
node_dir="$tools/mcp-node-${node_want:0:16}"
everything="$node_dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
py_req="$root/tests/mcp/requirements-mcp.txt"
py_want="$(sha256sum "$py_req" | cut -d' ' -f1)"
py_dir="$tools/mcp-python-${py_want:0:16}"
python="$py_dir/bin/python"

done_all() { [ -f "$everything" ] && [ -f "$node_dir/.done" ] && [ -x "$python" ] && [ -f "$py_dir/.done" ]; }
report() {
  if [ "$print" = 1 ]; then echo "$everything"; echo "$python"; fi
  exit 0
}
# The fast path, without a lock: what every test binary pays.
if done_all; then report; fi

apt_install() {
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      echo "ensure-mcp-servers: needs $* (e.g. apt-get install $*; as root, or give passwordless sudo)" >&2
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null; then
    echo "ensure-mcp-servers: needs $* and has no apt-get to install them" >&2
    exit 1
  fi
  say "apt-get install $*"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 \
    || { "${sudo[@]}" apt-get update -qq >/dev/null \
         && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
}

mkdir -p "$tools"
exec 9>"$tools/.mcp-servers.lock"
flock 9
if done_all; then report; fi

node_major() { node -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
if ! command -v node >/dev/null || [ "$(node_major)" -lt 20 ] || ! command -v npm >/dev/null; then
  apt_install nodejs npm
fi
if [ "$(node_major)" -lt 20 ]; then
  echo "ensure-mcp-servers: server-everything needs Node.js 20 or later; this one is $(node --version 2>/dev/null || echo missing)" >&2
  exit 1
fi

if ! { [ -f "$everything" ] && [ -f "$node_dir/.done" ]; }; then
  say "npm ci server-everything into $node_dir"
  rm -rf "$node_dir"
  mkdir -p "$node_dir"
  cp "$node_src/package.json" "$node_src/package-lock.json" "$node_dir/"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  [ -f "$everything" ] || { echo "ensure-mcp-servers: npm ci did not install $everything" >&2; exit 1; }
  touch "$node_dir/.done"
fi

if ! { [ -x "$python" ] && [ -f "$py_dir/.done" ]; }; then
  command -v python3 >/dev/null || apt_install python3 python3-venv
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_install python3-venv
  say "pip install the Python MCP SDK into $py_dir"
  rm -rf "$py_dir"
  python3 -m venv "$py_dir"
  "$python" -m pip install --quiet --disable-pip-version-check --no-input \
    --require-hashes --no-deps --only-binary=:all: -r "$py_req"
  "$python" -c 'import mcp.server.mcpserver' >/dev/null
  touch "$py_dir/.done"
fi
report
