#!/usr/bin/env bash
# Builds the Python plugins with componentize-py (installed, pinned, by
# scripts/ensure-componentize-py.sh) against contract 0.2.2.
#
#   plugins/python/build.sh                 # every plugin, skipping unchanged ones
#   plugins/python/build.sh file_search     # only these
#   plugins/python/build.sh --force         # rebuild even when unchanged
#   plugins/python/build.sh --out DIR       # write DIR/<name>.wasm
#   plugins/python/build.sh --contract 0.2.1 --out DIR NAME...
#                                           # for hosts older than 0.2.2 (no human);
#                                           # --contract 0.2.0 for hosts older than
#                                           # 0.2.1 (worlds tool and strategy; no
#                                           # config, no http)
#
# A plugin is a folder with an `app.py` (the app module) whose first line
# names its world: `# world: tool`, `# world: http-tool` or
# `# world: strategy`. Examples are `plugins/python/<name>/`, test plugins
# `plugins/python/tests/<name>/`. The output is `<name>.wasm` next to the
# Rust plugins, in plugins/target/wasm32-wasip2/release/.
#
# A build takes 10-20 s of CPU (componentize-py runs the app's top level
# and snapshots the interpreter), so a plugin is rebuilt only when the
# SHA-256 over its sources, the SDK, the WIT and the compiler's version
# changed (kept in `.<name>.wasm.inputs` beside the output).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/plugins/target/wasm32-wasip2/release"
wit="$root/wit/since_v0.2.2"
contract="0.2.2"
force=0
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --out) out="${2:?--out DIR}"; shift ;;
    --contract) contract="${2:?--contract VERSION}"; wit="$root/wit/since_v$contract"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1") ;;
  esac
  shift
done

[ -d "$wit" ] || { echo "build.sh: no contract $contract ($wit)" >&2; exit 2; }
cpy="$("$root/scripts/ensure-componentize-py.sh" --print)"
mkdir -p "$out"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

dirs=()
for app in "$here"/*/app.py "$here"/tests/*/app.py; do
  [ -f "$app" ] || continue
  d="$(dirname "$app")"
  n="$(basename "$d")"
  if [ ${#names[@]} -gt 0 ]; then
    keep=0
    for want in "${names[@]}"; do [ "$want" = "$n" ] && keep=1; done
    [ "$keep" = 1 ] || continue
  fi
  dirs+=("$d")
done
if [ ${#names[@]} -gt 0 ] && [ ${#dirs[@]} -ne ${#names[@]} ]; then
  echo "build.sh: no such Python plugin among: ${names[*]}" >&2
  exit 1
fi

# The inputs of one build, as one SHA-256: the compiler's path (its version
# is in it), the world, and every file of the plugin, the SDK and the WIT.
inputs_of() {
  local d="$1" world="$2"
  {
    echo "$cpy $world $contract"
    (cd "$d" && find . -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 -r sha256sum)
    (cd "$here/sdk" && find . -type f -name '*.py' ! -path '*/tests/*' -print0 | sort -z | xargs -0 -r sha256sum)
    (cd "$wit" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
  } | sha256sum | cut -d' ' -f1
}

for d in "${dirs[@]}"; do
  n="$(basename "$d")"
  world="$(sed -n '1s/^# world: *\([a-z-]*\) *$/\1/p' "$d/app.py")"
  case "$world" in
    tool|http-tool|strategy) ;;
    *) echo "build.sh: $d/app.py: the first line must be '# world: tool', '# world: http-tool' or '# world: strategy'" >&2; exit 1 ;;
  esac
  target="$out/$n.wasm"
  stamp="$out/.$n.wasm.inputs"
  sum="$(inputs_of "$d" "$world")"
  if [ "$force" = 0 ] && [ -f "$target" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    continue
  fi
  echo "python plugin $n ($world)" >&2
  tmp="$out/.$n.wasm.tmp"
  rm -f "$tmp"
  # Run from a scratch folder, without bytecode: the app's folder and the
  # SDK stay clean.
  (cd "$scratch" && PYTHONDONTWRITEBYTECODE=1 "$cpy" -q -d "$wit" -w "agentd:plugin/$world@$contract" \
    componentize -p "$d" -p "$here/sdk" app -o "$tmp")
  mv -f "$tmp" "$target"
  echo "$sum" >"$stamp"
done
