"""An MCP server written with the Python `mcp` SDK (PyPI), for agentd's MCP
client tests. It is third-party code from agentd's point of view: agentd
only speaks the protocol to it.

    python python_server.py            # stdio
    python python_server.py http PORT  # Streamable HTTP at http://127.0.0.1:PORT/mcp

Tools:
  add(a, b)            the sum, as text
  whoami()             this process's pid and how many calls it has served
                       (shows whether a server is shared or per run)
  env(name)            the value of one environment variable, or "<unset>"
  crash()              the process exits at once (a server that dies mid-run)
  hang()               never answers (a server that hangs)
  grow()               registers tool `late_tool` and announces
                       notifications/tools/list_changed
  picture()            an image, an embedded resource and a link, no text
  fail()               an isError result
  auth_digest()        SHA-256 of the request's Authorization header (HTTP)
  "files.read/v2 (beta)"  a name OpenAI would refuse
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, Image, MCPServer

server = MCPServer("agentd-test-python")
calls = 0


def counted():
    global calls
    calls += 1


@server.tool(description="Adds two integers.")
def add(a: int, b: int) -> str:
    counted()
    return str(a + b)


@server.tool(description="This process's pid and how many calls it has served.")
def whoami() -> str:
    counted()
    return f"pid={os.getpid()} calls={calls}"


@server.tool(description="The value of one environment variable.")
def env(name: str) -> str:
    counted()
    return os.environ.get(name, "<unset>")


@server.tool(description="Exits the server process at once.")
def crash() -> str:
    sys.stdout.flush()
    os._exit(3)


@server.tool(description="Sleeps, then answers with a long text.")
async def nap(seconds: float) -> str:
    counted()
    await asyncio.sleep(seconds)
    return f"slept {seconds} seconds; " + "z" * 200


@server.tool(description="Never answers (until cancelled).")
async def hang() -> str:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        # On stderr, which agentd logs under the server's name: the tests
        # read it to see that the client's notifications/cancelled arrived.
        print("hang: cancelled by the client", file=sys.stderr, flush=True)
        raise
    return "woke up"


@server.tool(description="Adds the tool late_tool and announces the change.")
async def grow(ctx: Context) -> str:
    counted()

    def late_tool() -> str:
        """A tool that appeared after the server started."""
        return "late tool ran"

    server.add_tool(late_tool, name="late_tool", description="Appeared after grow().")
    # notifications/tools/list_changed as an initialized session sends it
    # (protocol versions up to 2025-11-25; the SDK's ctx.notify_tools_changed
    # reaches only 2026-07-28 `subscriptions/listen` subscribers).
    await ctx.request_context.session.send_tool_list_changed()
    return "grown"


@server.tool(description="An image and resources, no text.")
def picture() -> list:
    counted()
    from mcp_types import EmbeddedResource, ResourceLink, TextResourceContents

    return [
        Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 56, format="png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="file:///notes.txt", mimeType="text/plain", text="hello notes"),
        ),
        ResourceLink(type="resource_link", uri="https://example.com/report.pdf", name="report", mimeType="application/pdf"),
    ]


@server.tool(description="Always fails.")
def fail() -> str:
    counted()
    raise ValueError("the fail tool failed, as asked")


@server.tool(description="The SHA-256 of this HTTP request's Authorization header.")
def auth_digest(ctx: Context) -> str:
    counted()
    import hashlib

    request = ctx.request_context.request
    header = request.headers.get("authorization") if request is not None else None
    if header is None:
        return "<no authorization header>"
    # A digest, not the value: the tests check the secret reached the server
    # without putting it in a tool result.
    return hashlib.sha256(header.encode()).hexdigest()


@server.tool(name="files.read/v2 (beta)", description="A tool whose name OpenAI refuses.")
def oddly_named(path: str) -> str:
    counted()
    return f"read {path}"


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
