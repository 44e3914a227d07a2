#!/usr/bin/env bash
# Builds the plugin components (plugins/ is its own Cargo workspace; the
# Python plugins of plugins/python/ with componentize-py, installed pinned by
# scripts/ensure-componentize-py.sh) and, with --install DIR, copies the
# bundled ones into an agentd plugins folder. Every component lands in
# plugins/target/wasm32-wasip2/release/<name>.wasm.
#
#   scripts/build-plugins.sh                  # build only
#   scripts/build-plugins.sh --install DIR    # build, then install into DIR
#   scripts/build-plugins.sh --bundled        # only the bundled plugins (no Python)
#   scripts/build-plugins.sh --list-bundled   # print the bundled plugins' names
#   AGENTD_NO_PYTHON=1 scripts/build-plugins.sh   # the Rust plugins only
set -euo pipefail
cd "$(dirname "$0")/.."

bundled_only=
dest=
list=
while [ $# -gt 0 ]; do
  case "$1" in
    --bundled) bundled_only=1 ;;
    --list-bundled) list=1 ;;
    --install) dest="${2:?usage: build-plugins.sh [--bundled] [--install DIR] [--list-bundled]}"; shift ;;
    *) echo "usage: build-plugins.sh [--bundled] [--install DIR] [--list-bundled]" >&2; exit 2 ;;
  esac
  shift
done

# The plugins that ship with agentd; the others in plugins/ exist for tests.
BUNDLED=(toolcall react planning terminate)
for extra in bash str_replace_editor python_execute ask_human; do
  [ -d "plugins/$extra" ] && BUNDLED+=("$extra")
done
if [ -n "$list" ]; then
  printf '%s\n' "${BUNDLED[@]}"
  exit 0
fi
# The Python examples (file_search, http_get) are built but not installed:
# each is ~18 MiB and compiles in 7-17 s on a daemon's first start; copy
# them from plugins/target/wasm32-wasip2/release/ where they are wanted.

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
if [ -n "$bundled_only" ]; then
  packages=()
  for p in "${BUNDLED[@]}"; do packages+=(-p "$p"); done
  cargo build --release --locked --target wasm32-wasip2 --manifest-path plugins/Cargo.toml "${packages[@]}"
else
  cargo build --release --locked --target wasm32-wasip2 --manifest-path plugins/Cargo.toml
fi
if [ -z "${AGENTD_NO_PYTHON:-}" ] && [ -z "$bundled_only" ]; then
  # Each Python plugin is rebuilt only when its inputs changed (10-20 s each).
  plugins/python/build.sh
fi

if [ -n "$dest" ]; then
  mkdir -p "$dest"
  for p in "${BUNDLED[@]}"; do
    # Copy then rename, so a running daemon never sees a half-written file.
    install -m 0644 "plugins/target/wasm32-wasip2/release/$p.wasm" "$dest/.$p.wasm.tmp"
    mv -f "$dest/.$p.wasm.tmp" "$dest/$p.wasm"
    echo "installed $dest/$p.wasm"
  done
fi
