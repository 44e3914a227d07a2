#!/usr/bin/env bash
# Builds the plugin components (plugins/ is its own Cargo workspace) and,
# with --install DIR, copies the bundled ones into an agentd plugins folder.
#
#   scripts/build-plugins.sh                  # build only
#   scripts/build-plugins.sh --install DIR    # build, then install into DIR
set -euo pipefail
cd "$(dirname "$0")/.."

# The plugins that ship with agentd; the others in plugins/ exist for tests.
BUNDLED=(toolcall terminate)
for extra in bash str_replace_editor python_execute; do
  [ -d "plugins/$extra" ] && BUNDLED+=("$extra")
done

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
cargo build --release --target wasm32-wasip2 --manifest-path plugins/Cargo.toml

if [ "${1:-}" = "--install" ]; then
  dest="${2:?usage: build-plugins.sh --install DIR}"
  mkdir -p "$dest"
  for p in "${BUNDLED[@]}"; do
    # Copy then rename, so a running daemon never sees a half-written file.
    install -m 0644 "plugins/target/wasm32-wasip2/release/$p.wasm" "$dest/.$p.wasm.tmp"
    mv -f "$dest/.$p.wasm.tmp" "$dest/$p.wasm"
    echo "installed $dest/$p.wasm"
  done
fi
