"""agentd's Python SDK: write agentd plugins (tools and strategies) in Python.

A tool is a function::

    from agentd.tool import tool, ToolApi  # ToolApi: the export componentize-py looks for
    from agentd import sandbox

    @tool(version="0.1.0")
    def count_lines(path: str) -> str:
        \"\"\"Counts the lines of a file in the run's sandbox.

        Args:
            path: The file, relative to the work dir.
        \"\"\"
        return str(sandbox.read_text(path).count("\\n"))

built with componentize-py against world ``tool`` (or ``http-tool``, to use
:mod:`agentd.http`) of ``wit/since_v0.2.1`` (see ``plugins/python/README.md``).

The modules, each importable only in a world that has what it wraps:

- :mod:`agentd.tool`: ``@tool`` and the ``ToolApi`` export (worlds ``tool``, ``http-tool``);
- :mod:`agentd.strategy`: ``@strategy``, ``Agent`` and the ``StrategyApi`` export (world ``strategy``);
- :mod:`agentd.sandbox`: the run's sandbox (tool worlds);
- :mod:`agentd.http`: outgoing HTTP through the host's allow-list (world ``http-tool``);
- :mod:`agentd.config`, :mod:`agentd.log`: the operator's settings, the daemon's log (every world);
- :mod:`agentd.errors` (re-exported here), :mod:`agentd.schema`: plain Python, no bindings.

This file imports no generated bindings, so ``import agentd`` works in every
world (and in plain CPython, for unit tests of :mod:`agentd.schema`).
"""

from .errors import HostError, HttpError, InvalidInput, TokenLimitReached, ToolError

__version__ = "0.2.1"
#: The contract version these bindings are generated from.
CONTRACT = "agentd:plugin@0.2.1"

__all__ = [
    "CONTRACT",
    "HostError",
    "HttpError",
    "InvalidInput",
    "TokenLimitReached",
    "ToolError",
    "__version__",
]
