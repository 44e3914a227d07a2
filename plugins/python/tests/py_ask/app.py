# world: tool
"""A test tool that asks the run's operator through ``agentd.ask_human``
(contract 0.2.2's ``human`` interface) and returns the answer; the host's
error, when there is no answer, escapes as the tool's error."""

import agentd
from agentd.tool import ToolApi, tool  # noqa: F401


@tool(version="0.1.0")
def py_ask(question: str) -> str:
    """Asks a person and returns what they said.

    Args:
        question: What to ask.
    """
    return "the person said: " + agentd.ask_human(question)
