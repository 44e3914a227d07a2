# world: tool
"""A test tool that never returns: the step deadline must stop it."""

from agentd.tool import ToolApi, tool  # noqa: F401


@tool(version="0.1.0")
def py_loop(n: int = 0) -> str:
    """Counts forever.

    Args:
        n: Where to start counting.
    """
    while True:
        n += 1
