#!/usr/bin/env bash
# The one test command: sets up everything the tests need on a fresh machine
# (the wasm target, the plugin components, a Docker engine and the sandbox
# images), then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== toolchain"
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi

echo "== plugins"
scripts/build-plugins.sh

echo "== tests"
cargo test --all-targets -- "$@"
