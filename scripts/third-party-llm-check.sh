#!/usr/bin/env bash
# Manual check (not part of CI): `agentd run --local --json` against an
# OpenAI-compatible chat-completions server that is not ours, with tool calls.
#
# The server is fakellm 0.3.5 from PyPI (https://github.com/1dg618/fakellm), a
# mock OpenAI/Anthropic server scripted by YAML rules. It is installed into a
# throwaway venv, started on a free 127.0.0.1 port, and each scenario below
# runs the bundled `toolcall` agent against it and checks the outcome and the
# exit code. fakellm does not validate request bodies, so the script also
# copies every request agentd sends and validates it against the official
# `openai` Python SDK's request types.
#
# Needs: python3 (3.10+) with venv and access to PyPI, curl, a built agentd
# (`cargo build`) and built plugins (`scripts/build-plugins.sh`).
#
# Environment:
#   AGENTD=path        agentd binary (default: target/debug/agentd)
#   PLUGINS_SRC=dir    directory holding toolcall.wasm and terminate.wasm
#                      (default: plugins/target/wasm32-wasip2/release)
#   FAKELLM_VENV=dir   reuse (or create once) this venv instead of a fresh one
#   KEEP=1             keep the temp dir (rules, configs, outputs, request log)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
AGENTD="${AGENTD:-$REPO/target/debug/agentd}"
PLUGINS_SRC="${PLUGINS_SRC:-$REPO/plugins/target/wasm32-wasip2/release}"

# Exact versions this check was written and verified with.
FAKELLM_PIN="fakellm==0.3.5"
CONSTRAINTS="fastapi==0.165.0
starlette==1.10.0
uvicorn==0.54.0
pydantic==2.14.4
PyYAML==6.0.4
click==8.5.1
openai==3.57.0"

for tool in python3 curl; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 2; }
done
[[ -x "$AGENTD" ]] || { echo "no agentd at $AGENTD: run \`cargo build\` first" >&2; exit 2; }
for p in toolcall terminate; do
  [[ -f "$PLUGINS_SRC/$p.wasm" ]] || {
    echo "no $PLUGINS_SRC/$p.wasm: run scripts/build-plugins.sh first" >&2
    exit 2
  }
done

WORK="$(mktemp -d /tmp/agentd-third-party.XXXXXX)"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ "${KEEP:-0}" == 1 ]]; then
    echo "kept $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- venv
VENV="${FAKELLM_VENV:-$WORK/venv}"
echo "== venv $VENV"
if ! "$VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("fakellm") != "0.3.5")' 2>/dev/null; then
  python3 -m venv "$VENV"
  printf '%s\n' "$CONSTRAINTS" >"$WORK/constraints.txt"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    -c "$WORK/constraints.txt" "$FAKELLM_PIN" openai
fi
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as m
print("   " + ", ".join(f"{p} {m.version(p)}" for p in
      ("fakellm", "fastapi", "uvicorn", "pydantic", "openai")))
EOF

# ---------------------------------------------------------------- rules
# One model name per scenario; fakellm picks the rule with `model_matches`.
# Turn-based rules rely on the conversation state being reset before each run.
cat >"$WORK/fakellm.yaml" <<'EOF'
version: 1
defaults:
  fallback: deterministic_echo
rules:
  - name: success
    when: {model_matches: "scenario-success"}
    respond:
      tool_calls:
        - {name: terminate, arguments: {status: success}}

  - name: failure
    when: {model_matches: "scenario-failure"}
    respond:
      tool_calls:
        - {name: terminate, arguments: {status: failure}}

  - name: text_only
    when: {model_matches: "scenario-text"}
    respond:
      content: "I am just chatting, no tools."

  - name: bad_request
    when: {model_matches: "scenario-error"}
    respond:
      status: 400
      error: "mock bad request from fakellm"

  # Turn 1 calls a tool the agent does not have; turn 2 fires only once the
  # tool-result message with agentd's error text comes back.
  - name: multiturn_1
    when: {model_matches: "scenario-multiturn", turn: 1}
    respond:
      tool_calls:
        - {name: lookup, arguments: {q: "agentd"}}
  - name: multiturn_2
    when:
      model_matches: "scenario-multiturn"
      previous_message_role: tool
      tool_result_contains: "Unknown tool 'lookup'"
    respond:
      tool_calls:
        - {name: terminate, arguments: {status: success}}

  # Turn = request number, so agentd's retry is turn 2.
  - name: retry_1
    when: {model_matches: "scenario-retry", turn: 1}
    respond:
      status: 503
      error: "mock overloaded"
  - name: retry_2
    when: {model_matches: "scenario-retry", turn: 2}
    respond:
      tool_calls:
        - {name: terminate, arguments: {status: success}}
EOF

# A copy of every request body is kept for the shape check at the end; the
# responses are fakellm's own (fakellm.server:app, unmodified).
cat >"$WORK/capture.py" <<'EOF'
import json, os
from fakellm.server import app as fakellm_app

LOG = os.environ["CAPTURE_LOG"]

async def app(scope, receive, send):
    if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
        return await fakellm_app(scope, receive, send)
    chunks, more = [], True
    while more:
        msg = await receive()
        chunks.append(msg.get("body", b""))
        more = msg.get("more_body", False)
    body = b"".join(chunks)
    with open(LOG, "a") as f:
        f.write(body.decode() + "\n")
    done = False
    async def replay():
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    await fakellm_app(scope, replay, send)
EOF

# ---------------------------------------------------------------- server
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT"
echo "== fakellm on $BASE"
FAKELLM_CONFIG="$WORK/fakellm.yaml" CAPTURE_LOG="$WORK/requests.jsonl" \
  "$VENV/bin/python" -m uvicorn --app-dir "$WORK" capture:app \
  --host 127.0.0.1 --port "$PORT" --workers 1 --log-level warning \
  >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  curl -fsS "$BASE/_fakellm/stats" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; echo "fakellm did not start" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "$BASE/_fakellm/stats" >/dev/null || { cat "$WORK/server.log" >&2; exit 1; }

mkdir -p "$WORK/plugins" "$WORK/state"
cp "$PLUGINS_SRC/toolcall.wasm" "$PLUGINS_SRC/terminate.wasm" "$WORK/plugins/"

# ---------------------------------------------------------------- helpers
PASSES=0
FAILS=0
pass() { echo "PASS $*"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

# field FILE EXPR: a Python expression over `d`, the parsed JSON in FILE.
field() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

server_requests() { curl -fsS "$BASE/_fakellm/stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["total_requests"])'; }

# run_agent NAME MODEL REQUEST [TOML...]: writes $WORK/NAME.{toml,json,err},
# sets RC (agentd's exit code) and REQS (requests fakellm answered).
run_agent() {
  local name=$1 model=$2 request=$3
  shift 3
  {
    echo "[llm]"
    echo "model = \"$model\""
    echo "base_url = \"$BASE/v1\""
    echo 'api_key = "test"'
    echo "retry_backoff_ms = 10"
    for line in "$@"; do [[ $line == llm.* ]] && echo "${line#llm.}"; done
    echo "[daemon]"
    echo "plugins_dir = \"$WORK/plugins\""
    echo "state_dir = \"$WORK/state\""
    echo "[agents.toolcall]"
    for line in "$@"; do [[ $line == agent.* ]] && echo "${line#agent.}"; done
    true
  } >"$WORK/$name.toml"
  curl -fsS -X POST "$BASE/_fakellm/reset" >/dev/null
  local before
  before=$(server_requests)
  RC=0
  "$AGENTD" run --local --json --config "$WORK/$name.toml" toolcall "$request" \
    >"$WORK/$name.json" 2>"$WORK/$name.err" || RC=$?
  REQS=$(($(server_requests) - before))
  OUT="$WORK/$name.json"
}

# expect NAME OUTCOME EXIT [CHECK-DESCRIPTION PY-EXPR]...
expect() {
  local name=$1 outcome=$2 code=$3
  shift 3
  local got
  got=$(field "$OUT" 'd["outcome"]' 2>/dev/null || echo "<no JSON>")
  local problems=()
  [[ "$got" == "$outcome" ]] || problems+=("outcome $got, expected $outcome")
  [[ "$RC" == "$code" ]] || problems+=("exit $RC, expected $code")
  while (($#)); do
    local what=$1 expr=$2
    shift 2
    [[ "$(field "$OUT" "$expr" 2>&1)" == True ]] || problems+=("$what")
  done
  if ((${#problems[@]} == 0)); then
    pass "$name: outcome=$got exit=$RC steps=$(field "$OUT" 'd["steps"]') usage=$(field "$OUT" 'd["usage"]') server_requests=$REQS"
  else
    local msg
    msg=$(printf '%s; ' "${problems[@]}")
    fail "$name: ${msg%; }"
    sed 's/^/    | /' "${OUT%.json}.err" || true
    sed 's/^/    | /' "$OUT" | head -40 || true
  fi
}

echo "== scenarios"

# 1. The model calls terminate -> finished, exit 0.
run_agent success scenario-success "hello success"
expect "1 tool call terminate(success)" finished 0 \
  "one step" 'd["steps"] == 1' \
  "one request" "$REQS == 1" \
  "assistant tool_calls kept" '[c["function"]["name"] for m in d["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []] == ["terminate"]' \
  "tool result answers the call id" '[m["tool_call_id"] for m in d["messages"] if m["role"] == "tool"] == [c["id"] for m in d["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]' \
  "result says success" '"status: success" in d["result"]' \
  "usage taken from the server" 'd["usage"]["prompt_tokens"] > 0'

# 1b. terminate(failure) still ends the run normally (OpenManus semantics).
run_agent failure scenario-failure "hello failure"
expect "1b tool call terminate(failure)" finished 0 \
  "result says failure" '"status: failure" in d["result"]'

# 2. Text only, every time -> max_steps, exit 3.
run_agent text scenario-text "hello text" "agent.max_steps = 2"
expect "2 text only" max_steps 3 \
  "two steps" 'd["steps"] == 2' \
  "two requests" "$REQS == 2" \
  "text kept" '[m["content"] for m in d["messages"] if m["role"] == "assistant"] == ["I am just chatting, no tools."] * 2'

# 3. HTTP 400 -> error, exit 1, not retried, server message surfaced.
run_agent error scenario-error "hello error"
expect "3 HTTP 400" error 1 \
  "server error text in record" '"HTTP 400: mock bad request from fakellm" in (d["error"] or "")' \
  "not retried" "$REQS == 1"

# 3b. HTTP 503 then success -> retried once, finished.
run_agent retry scenario-retry "hello retry"
expect "3b HTTP 503 then tool call" finished 0 \
  "retried once" "$REQS == 2"

# 4. max_input_tokens = 50: agentd's own estimate refuses the first request.
run_agent tokens50 scenario-text "hello tokens" "llm.max_input_tokens = 50" "agent.max_steps = 2"
expect "4 token budget 50 (pre-flight)" token_limit 4 \
  "nothing sent" "$REQS == 0" \
  "limit message" '"Current: 0," in d["messages"][-1]["content"]'
E1=$(field "$OUT" 'int(d["messages"][-1]["content"].split("Needed: ")[1].split(",")[0])' 2>/dev/null || echo 0)

# 4b. The server's reported usage counts against the budget. With the budget
# at E1 (step 1's estimate) the run stops at step 2 and reports the server's
# step-1 prompt_tokens as Current with step 2's estimate E2 as Needed. With
# the budget at exactly E2 the run can only stop if the usage fakellm reported
# for step 1 is counted; at usage + E2 it must not stop.
run_agent tokens_e1 scenario-text "hello tokens" "llm.max_input_tokens = $E1" "agent.max_steps = 2"
expect "4b token budget = step-1 estimate ($E1)" token_limit 4 \
  "one request answered" "$REQS == 1" \
  "Current is the server's prompt_tokens" '("Current: %d," % d["usage"]["prompt_tokens"]) in d["messages"][-1]["content"] and d["usage"]["prompt_tokens"] > 0'
U1=$(field "$OUT" 'd["usage"]["prompt_tokens"]' 2>/dev/null || echo 0)
E2=$(field "$OUT" 'int(d["messages"][-1]["content"].split("Needed: ")[1].split(",")[0])' 2>/dev/null || echo 0)

run_agent tokens_e2 scenario-text "hello tokens" "llm.max_input_tokens = $E2" "agent.max_steps = 2"
expect "4c token budget = step-2 estimate ($E2), stopped by server usage ($U1)" token_limit 4 \
  "stopped at step 2" 'd["steps"] == 2' \
  "one request answered" "$REQS == 1"

run_agent tokens_ok scenario-text "hello tokens" "llm.max_input_tokens = $((U1 + E2))" "agent.max_steps = 2"
expect "4d token budget = usage + estimate ($((U1 + E2))), fits" max_steps 3 \
  "two requests" "$REQS == 2"

# 5. Multi-turn: unknown tool -> tool-result message -> server matches on it.
run_agent multiturn scenario-multiturn "hello multiturn" "agent.max_steps = 3"
expect "5 multi-turn via tool result" finished 0 \
  "two steps" 'd["steps"] == 2' \
  "two requests" "$REQS == 2" \
  "tool result sent back" "any(m['role'] == 'tool' and m['content'] == \"Error: Unknown tool 'lookup'\" for m in d['messages'])"

# 6. Every request agentd sent validates against the openai SDK's types.
echo "== request shape ($(wc -l <"$WORK/requests.jsonl") requests)"
if "$VENV/bin/python" - "$WORK/requests.jsonl" <<'EOF'; then
import json, sys
from pydantic import TypeAdapter
from openai.types.chat import completion_create_params as p
from openai.types.chat import (
    ChatCompletionAssistantMessageParam, ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam, ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam, ChatCompletionUserMessageParam)

# The SDK types its lists as Iterable[...], which pydantic validates lazily,
# so messages, tool calls and tools are each validated on their own.
def keys(td):
    return set(td.__required_keys__) | set(td.__optional_keys__)

def check(td, value, where, notes):
    TypeAdapter(td).validate_python(value)
    for k in sorted(set(value) - keys(td)):
        notes.add(f"{where} carries '{k}', which the openai SDK's {td.__name__} lacks")

roles = {"system": ChatCompletionSystemMessageParam, "user": ChatCompletionUserMessageParam,
         "assistant": ChatCompletionAssistantMessageParam, "tool": ChatCompletionToolMessageParam}
bad, notes = 0, set()
for n, line in enumerate(open(sys.argv[1]), 1):
    body = json.loads(line)
    try:
        check(p.CompletionCreateParamsNonStreaming, body, "the request", notes)
        for m in body["messages"]:
            check(roles[m["role"]], m, f"a {m['role']} message", notes)
            for call in m.get("tool_calls") or []:
                check(ChatCompletionMessageFunctionToolCallParam, call, "a tool call", notes)
        for tool in body.get("tools", []):
            check(ChatCompletionFunctionToolParam, tool, "a tool", notes)
    except Exception as e:
        bad += 1
        print(f"    | request {n}: {e}")
for note in sorted(notes):
    print(f"NOTE {note}")
sys.exit(1 if bad else 0)
EOF
  pass "6 request bodies validate as openai CompletionCreateParams"
else
  fail "6 request bodies do not validate as openai CompletionCreateParams"
fi

echo "== $PASSES passed, $FAILS failed"
((FAILS == 0))
