# world: tool
"""A test tool that raises: `mode` picks the exception, to check that each
becomes the tool's error result (and the run goes on)."""

from typing import Literal

from agentd import ToolError
from agentd.tool import ToolApi, tool  # noqa: F401


@tool(version="0.1.0")
def py_raise(mode: Literal["value", "tool", "ok"] = "value", text: str = "boom") -> str:
    """Raises an exception whose text is `text`, or answers `ok: text`.

    Args:
        mode: value: a ValueError; tool: a ToolError; ok: no exception.
        text: The exception's text.
    """
    if mode == "value":
        raise ValueError(text)
    if mode == "tool":
        raise ToolError(text)
    return f"ok: {text}"
