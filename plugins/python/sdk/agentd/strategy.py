"""``@strategy``: a Python function becomes an agent's ``step()``.

::

    from agentd.strategy import Agent, StrategyApi, strategy  # noqa: F401 (StrategyApi is the export)

    @strategy(name="react", version="0.1.0", max_steps=20,
              system_prompt="You are a careful agent.")
    def step(agent: Agent) -> str:
        \"\"\"Asks the model once and runs the tools it calls.\"\"\"
        reply = agent.chat(agent.memory(), tools=agent.tools())
        agent.add_message(reply.message)
        if not reply.message.tool_calls:
            agent.finish()
            return reply.message.content or ""
        for call in reply.message.tool_calls:
            agent.add_message(agent.tool_message(call, agent.invoke_tool_text(call)))
        return f"ran {len(reply.message.tool_calls)} tool(s)"

Build against world ``strategy`` of ``wit/since_v0.2.1``. The function is
called once per step with an :class:`Agent` (the run's ``agent`` import);
what it returns is the step's result line, what it raises ends the run
``error`` with the exception's text (naming this strategy), except
:class:`~agentd.errors.TokenLimitReached`, whose text becomes the step's
result (the host then ends the run ``token_limit``).

The keyword arguments of ``@strategy`` are its ``metadata()`` and
``defaults()`` (each default applies where an agent's configuration says
nothing; ``None`` defers to the daemon). The same pitfalls as for tools
apply (see :mod:`agentd.tool`): imports at module top level only, and the
app module must name ``StrategyApi``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from wit_world import exports

from . import _bindings
from ._bindings import Err, types
from .errors import HostError, TokenLimitReached, ToolError

try:
    from wit_world.exports import strategy_api as _strategy_api
    from wit_world.imports import agent as _agent
except ImportError as e:  # a tool world
    raise ImportError("agentd.strategy needs world strategy (agentd:plugin/strategy@0.2.1)") from e

__all__ = [
    "Agent",
    "AgentConfig",
    "ChatResponse",
    "FinishReason",
    "Message",
    "Role",
    "StrategyApi",
    "ToolCall",
    "ToolChoice",
    "ToolSpec",
    "strategy",
]

# The contract's types, re-exported so a strategy needs no generated module.
Message = types.Message
ToolCall = types.ToolCall
ToolSpec = types.ToolSpec
Role = types.Role
ToolChoice = types.ToolChoice
AgentConfig = _agent.AgentConfig
ChatResponse = _agent.ChatResponse
FinishReason = _agent.FinishReason


class Agent:
    """The run as the strategy sees it: the contract's ``agent`` interface,
    its errors as exceptions (:class:`~agentd.errors.HostError` with the
    host's code; :class:`~agentd.errors.TokenLimitReached` from ``chat``)."""

    def config(self) -> AgentConfig:
        """The agent's configuration for this step (prompts, step number, limits)."""
        return _agent.config()

    def memory(self) -> list[Message]:
        """The run's memory, oldest first, starting with its request."""
        return list(_agent.memory())

    def add_message(self, message: Message) -> None:
        try:
            _agent.add_message(message)
        except Err as e:
            raise _bindings.host_error(e, "add-message") from None

    def chat(
        self,
        messages: Iterable[Message],
        tools: Optional[Iterable[ToolSpec]] = None,
        tool_choice: Optional[ToolChoice] = None,
    ) -> ChatResponse:
        """One request to the run's model. ``tool_choice`` defaults to the
        agent's configured one."""
        choice = tool_choice if tool_choice is not None else _agent.config().tool_choice
        request = _agent.ChatRequest(messages=list(messages), tools=list(tools or []), tool_choice=choice)
        try:
            return _agent.chat(request)
        except Err as e:
            if isinstance(e.value, _agent.ChatError_TokenLimit):
                raise TokenLimitReached(e.value.value) from None
            if isinstance(e.value, _agent.ChatError_Failed):
                raise _bindings.host_error(Err(e.value.value), "chat") from None
            raise HostError(f"chat: {e.value!r}") from None

    def tools(self) -> list[ToolSpec]:
        """The specs of the agent's tools."""
        return list(_agent.tools())

    def invoke_tool(self, call: ToolCall) -> str:
        """Runs one tool call; :class:`HostError` when the tool reports an
        error (its code and message kept)."""
        try:
            return _agent.invoke_tool(call)
        except Err as e:
            raise _bindings.host_error(e, call.name) from None

    def invoke_tool_text(self, call: ToolCall) -> str:
        """:meth:`invoke_tool` as the text a model should see: the result,
        or ``Error: <message>``."""
        try:
            return self.invoke_tool(call)
        except HostError as e:
            return f"Error: {e}"

    def finish(self) -> None:
        """Ends the run after this step (outcome ``finished``)."""
        _agent.finish()

    # Messages, built with the contract's shapes.
    @staticmethod
    def user_message(text: str) -> Message:
        return Message(role=Role.USER, content=text, tool_calls=[], tool_call_id=None, name=None)

    @staticmethod
    def assistant_message(text: Optional[str], tool_calls: Optional[list[ToolCall]] = None) -> Message:
        return Message(role=Role.ASSISTANT, content=text, tool_calls=list(tool_calls or []), tool_call_id=None, name=None)

    @staticmethod
    def system_message(text: str) -> Message:
        return Message(role=Role.SYSTEM, content=text, tool_calls=[], tool_call_id=None, name=None)

    @staticmethod
    def tool_message(call: ToolCall, text: str) -> Message:
        """The answer to ``call``, as a real server wants it (its id and name)."""
        return Message(role=Role.TOOL, content=text, tool_calls=[], tool_call_id=call.id, name=call.name)


@dataclass(frozen=True)
class Strategy:
    """A function registered by :func:`strategy`, with its metadata and defaults."""

    func: Callable[[Agent], object]
    name: str
    version: str
    description: str
    system_prompt: Optional[str]
    next_step_prompt: Optional[str]
    max_steps: Optional[int]
    tool_choice: Optional[ToolChoice]
    special_tools: Optional[list[str]]


_registered: Strategy | None = None
_AGENT = Agent()


def strategy(
    func: Callable[[Agent], object] | None = None,
    *,
    name: str | None = None,
    version: str = "0.1.0",
    description: str | None = None,
    system_prompt: str | None = None,
    next_step_prompt: str | None = None,
    max_steps: int | None = None,
    tool_choice: ToolChoice | str | None = None,
    special_tools: Optional[list[str]] = None,
):
    """Makes ``func(agent) -> str`` this component's ``step()``. ``name``
    defaults to the function's; ``description`` to its docstring's first
    line. ``tool_choice`` may be a :data:`ToolChoice` or ``"none"``,
    ``"auto"``, ``"required"``."""

    def register(f: Callable[[Agent], object]) -> Callable[[Agent], object]:
        global _registered
        if _registered is not None:
            raise TypeError(f"@strategy on {f.__qualname__}: this component already has {_registered.name!r}")
        text = description
        if text is None:
            doc = (f.__doc__ or "").strip()
            text = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
        if not text:
            raise TypeError(f"@strategy on {f.__qualname__}: give it a docstring or description=")
        choice = tool_choice
        if isinstance(choice, str):
            try:
                choice = ToolChoice[choice.upper()]
            except KeyError:
                raise TypeError(f"tool_choice {tool_choice!r}: use none, auto or required") from None
        _registered = Strategy(
            func=f,
            name=name or f.__name__,
            version=version,
            description=text,
            system_prompt=system_prompt,
            next_step_prompt=next_step_prompt,
            max_steps=max_steps,
            tool_choice=choice,
            special_tools=list(special_tools) if special_tools is not None else None,
        )
        return f

    return register(func) if func is not None else register


def registered() -> Strategy:
    if _registered is None:
        raise RuntimeError("no @strategy in this component: decorate the step function with @strategy")
    return _registered


class StrategyApi(exports.StrategyApi):
    """The ``strategy-api`` export: componentize-py instantiates the class of
    this name found in the app module, so the app module must import it."""

    def metadata(self):
        s = registered()
        return types.PluginMetadata(name=s.name, version=s.version, description=s.description)

    def defaults(self):
        s = registered()
        return _strategy_api.StrategyDefaults(
            system_prompt=s.system_prompt,
            next_step_prompt=s.next_step_prompt,
            max_steps=s.max_steps,
            tool_choice=s.tool_choice,
            special_tools=s.special_tools,
        )

    def step(self) -> str:
        s = registered()
        try:
            result = s.func(_AGENT)
        except TokenLimitReached as e:
            return str(e)
        except ToolError as e:
            raise _bindings.to_err(e) from None
        except Err:
            raise
        except Exception as e:
            raise _bindings.to_err(e) from None
        return "" if result is None else str(result)
