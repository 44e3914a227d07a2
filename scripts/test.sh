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
# Rust plugins, then the Python ones (componentize-py installed pinned by
# scripts/ensure-componentize-py.sh; unchanged ones are not rebuilt).
scripts/build-plugins.sh

echo "== plugin unit tests"
# The plugins' own logic (toolcall's think/act, the editor, parsers...),
# natively over fake hosts: seconds, and a failure names the plugin.
cargo test --manifest-path plugins/Cargo.toml --workspace --quiet

echo "== python sdk"
(cd plugins/python/sdk && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests)

echo "== docker engine and sandbox images"
# Tests that need Docker fail (never skip) without an engine; this makes
# sure there is one: install docker.io if missing, start dockerd
# --bridge=none --iptables=false if none answers, build the images locally.
scripts/ensure-docker.sh
scripts/build-images.sh --no-ensure
# tests/sandbox_engines.rs starts and stops a second engine itself with
# scripts/second-dockerd.sh (as root, like the rest of the suite), giving it
# the tiny image from this one.

echo "== third-party MCP servers"
# server-everything (npm, Node installed if missing) and the Python MCP SDK,
# pinned, for the MCP client tests and benchmark.
scripts/ensure-mcp-servers.sh

echo "== tests"
# The whole output is kept so that, when something fails, what each
# failing test printed (its panic message first) is repeated at the very
# end: the failures of one test binary are otherwise buried under the
# output of the binaries and benchmarks that run after it, and a CI that
# shows only the tail of the log would show no cause.
log="$(mktemp -t agentd-test.XXXXXX.log)"
status=0
# Every target but the three benches (`daemon`, `sandbox`, `reload`) that
# only print "skipped" when not run by `cargo bench`: each is a debug
# binary linking the whole daemon, built for nothing (clippy
# --all-targets still checks they compile). The other benches run a
# short pass of themselves as a smoke test.
cargo test --lib --bins --tests \
  --bench step_overhead --bench mcp_call --bench plugin_langs \
  --no-fail-fast -- "$@" 2>&1 | tee "$log" || status=$?
if [ "$status" -eq 0 ]; then
  rm -f "$log"
else
  echo
  echo "== what the failing tests printed (first 60 and last 20 lines of each; all of it in $log)"
  awk '
    function flush() {
      if (name == "") return
      if (n > 80) {
        printf "  [... %d lines left out ...]\n", n - 80
        for (i = n - 19; i <= n; i++) print tail[i % 20]
      } else {
        for (i = 61; i <= n; i++) print tail[i % 20]
      }
      name = ""
    }
    /^---- .* stdout ----$/ { flush(); name = $0; n = 0; print; next }
    /^failures:$/ { flush(); next }
    name != "" {
      n++
      if (n <= 60) print
      else tail[n % 20] = $0
    }
    END { flush() }
  ' "$log"
fi
exit "$status"
