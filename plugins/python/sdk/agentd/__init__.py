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
:mod:`agentd.http`) of ``wit/since_v0.2.2`` (see ``plugins/python/README.md``).

The modules, each importable only in a world that has what it wraps:

- :mod:`agentd.tool`: ``@tool`` and the ``ToolApi`` export (worlds ``tool``, ``http-tool``);
- :mod:`agentd.strategy`: ``@strategy``, ``Agent`` and the ``StrategyApi`` export (world ``strategy``);
- :mod:`agentd.sandbox`: the run's sandbox (tool worlds);
- :mod:`agentd.http`: outgoing HTTP through the host's allow-list (world ``http-tool``);
- :mod:`agentd.config`, :mod:`agentd.log`: the operator's settings, the daemon's log (every world);
- :mod:`agentd.human`: asking the run's operator, also as :func:`agentd.ask_human` (every world);
- :mod:`agentd.errors` (re-exported here), :mod:`agentd.schema`: plain Python, no bindings.

This file needs no generated bindings, so ``import agentd`` works in every
world (and in plain CPython, for unit tests of :mod:`agentd.schema`); only
:func:`ask_human` does, and without them it raises.
"""

from .errors import HostError, HttpError, InvalidInput, TokenLimitReached, ToolError

try:
    # Imported here, at build time: componentize-py snapshots the modules
    # imported by then, and one imported inside a call finds no files.
    from .human import ask as ask_human
except ImportError:  # plain CPython: no component, so no one to ask

    def ask_human(question: str) -> str:
        """Asks the run's operator ``question`` and returns the answer (see
        :func:`agentd.human.ask`); here, outside a component, it raises."""
        raise HostError("agentd.ask_human works only in a component built with componentize-py", code="failed")


__version__ = "0.2.2"
#: The contract version these bindings are generated from.
CONTRACT = "agentd:plugin@0.2.2"

__all__ = [
    "CONTRACT",
    "HostError",
    "HttpError",
    "InvalidInput",
    "TokenLimitReached",
    "ToolError",
    "__version__",
    "ask_human",
]
