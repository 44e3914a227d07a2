# world: tool
"""The Python twin of the Rust test tool `echo`, for benches/plugin_langs.rs:
the same spec shape and work, so the figures compare the languages only."""

from agentd.tool import ToolApi, tool  # noqa: F401


@tool(version="0.1.0")
def py_echo(text: str) -> str:
    """Returns its text.

    Args:
        text: What to return.
    """
    return text
