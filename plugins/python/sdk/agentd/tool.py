"""``@tool``: a Python function becomes the component's tool.

::

    from agentd.tool import tool, ToolApi  # noqa: F401  (ToolApi is the export)

    @tool(version="1.0.0")
    def add(a: int, b: int = 1) -> int:
        \"\"\"Adds two numbers.

        Args:
            a: The first.
            b: The second.
        \"\"\"
        return a + b

- The tool's name is the function's (or ``name=``); it is also the plugin's
  name in ``metadata()``. Its description is the docstring's first
  paragraph (or ``description=``); each parameter's, the ``Args:`` section.
- The JSON Schema of its parameters comes from the annotations
  (:mod:`agentd.schema`); the model's arguments are checked and converted
  before the call, and arguments that do not fit are an ``invalid-input``
  error naming the parameter: the function never sees them.
- What it returns is the tool's result: a ``str`` as is, ``None`` as ``""``,
  ``bytes`` decoded as UTF-8, anything else as JSON.
- What it raises is the tool's error result, with the exception's text:
  :class:`~agentd.errors.ToolError` (and ``InvalidInput``, ``HostError``,
  ``HttpError``) keep their ``code``, any other exception is ``failed``.
  The run goes on: the model sees ``Error: <text>``.

Pitfalls (componentize-py builds the component by running this module's
top level and snapshotting the interpreter):

- **Import at module top level only.** An ``import`` inside the function
  runs in the component, which has no filesystem to import from, and fails.
- **The app module must name** ``ToolApi``: componentize-py looks up the
  class for the exported ``tool-api`` interface there (``from agentd.tool
  import ToolApi`` does it). One ``@tool`` per component.
- Work done at top level (reading tables, compiling regexes) is done once,
  at build time, and is free at run time; randomness seeded then is the
  same in every instance.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from wit_world import exports

from . import _bindings
from ._bindings import types
from .errors import ToolError
from .schema import Described, describe

__all__ = ["Tool", "ToolApi", "tool", "registered"]


@dataclass(frozen=True)
class Tool:
    """A function registered by :func:`tool`, with what the host asks of it."""

    func: Callable[..., Any]
    name: str
    version: str
    description: str
    described: Described

    def metadata(self):
        return types.PluginMetadata(
            name=self.name, version=self.version, description=self.description
        )

    def spec(self):
        return types.ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.described.parameters_json(),
        )

    def call(self, arguments: str) -> str:
        """Runs the function on the model's arguments; raises
        :class:`ToolError` (or what the function raised)."""
        kwargs = self.described.convert(arguments)
        return _result_text(self.func(**kwargs))


_registered: Tool | None = None


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    version: str = "0.1.0",
    description: str | None = None,
):
    """Makes ``func`` this component's tool. Use as ``@tool`` or
    ``@tool(name=..., version=..., description=...)``. Raises ``TypeError``
    (at build time) for a signature the model cannot call, or a second tool."""

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        global _registered
        if _registered is not None:
            raise TypeError(
                f"@tool on {f.__qualname__}: this component already exports "
                f"{_registered.name!r}; a component is one tool"
            )
        described = describe(f)
        text = description if description is not None else described.description
        if not text:
            raise TypeError(
                f"@tool on {f.__qualname__}: give it a docstring (its first "
                "paragraph tells the model what the tool does) or description="
            )
        _registered = Tool(
            func=f,
            name=name or f.__name__,
            version=version,
            description=text,
            described=described,
        )
        return f

    return register(func) if func is not None else register


def registered() -> Tool:
    """The component's tool; ``RuntimeError`` if none was registered."""
    if _registered is None:
        raise RuntimeError(
            "no @tool in this component: decorate one function of the app module with @tool"
        )
    return _registered


def _result_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return json.dumps(value, default=str)


class ToolApi(exports.ToolApi):
    """The ``tool-api`` export: componentize-py instantiates the class of this
    name found in the app module, so the app module must import it."""

    def metadata(self):
        return registered().metadata()

    def spec(self):
        return registered().spec()

    def invoke(self, arguments: str) -> str:
        t = registered()
        try:
            return t.call(arguments)
        except ToolError as e:
            raise _bindings.to_err(e) from None
        except _bindings.Err:
            # A raw binding error the tool let escape: already a contract error.
            raise
        except Exception as e:
            _bindings.logging_api.log(
                _bindings.logging_api.Level.DEBUG,
                f"{t.name} raised:\n{traceback.format_exc()}",
            )
            raise _bindings.to_err(e) from None
