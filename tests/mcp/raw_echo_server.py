"""The least an MCP server over stdio can be: newline-delimited JSON-RPC
answered by hand, no SDK, one tool (`echo`). agentd's `mcp_call` benchmark
calls it to show what a call costs on agentd's side (rmcp's framing, the
pipe, the observation) when the server itself does next to nothing."""

import json
import sys


def answer(id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if id is None:
        continue  # a notification
    if method == "initialize":
        answer(id, {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-echo", "version": "1"},
        })
    elif method == "tools/list":
        answer(id, {"tools": [{
            "name": "echo",
            "description": "Returns its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }]})
    elif method == "tools/call":
        text = (msg["params"].get("arguments") or {}).get("text", "")
        answer(id, {"content": [{"type": "text", "text": text}]})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id,
                                     "error": {"code": -32601, "message": "method not found"}}) + "\n")
        sys.stdout.flush()
