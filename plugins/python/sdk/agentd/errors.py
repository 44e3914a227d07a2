"""The exceptions of the SDK. Plain Python: no generated bindings.

A tool (or a strategy's ``step``) that raises becomes an error result of the
contract: :class:`ToolError` and its subclasses carry the contract's
``error-code`` (as its WIT name) in ``code``; any other exception becomes
``failed``. The message is the exception's text.
"""

from __future__ import annotations


class ToolError(Exception):
    """Raise it for an error result with ``error-code.failed`` (or ``code``)."""

    #: The contract's ``error-code`` name: ``invalid-input``, ``unknown-tool``,
    #: ``llm-failed``, ``sandbox-unavailable``, ``sandbox-failed``, ``failed``,
    #: ``cancelled``.
    code: str = "failed"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class InvalidInput(ToolError):
    """Arguments that do not fit the tool's parameters (``invalid-input``).

    The SDK raises it itself when the model's arguments do not match the
    function's signature; a tool may raise it for arguments it refuses.
    """

    code = "invalid-input"


class HostError(ToolError):
    """An import of the host failed: the sandbox, a tool call, the LLM.

    ``code`` is the host's error code (``sandbox-failed``,
    ``sandbox-unavailable``, ...), kept when the exception leaves the tool,
    so the model sees what the host said.
    """


class HttpError(ToolError):
    """An HTTP request failed before a response came (refused by the host's
    allow-list, DNS, connection, timeout) or its body could not be read.

    When the host refused the request, the text is the host's own message
    (which names the host and the ``allow_hosts`` key to change).
    ``error_code`` is the ``wasi:http`` error-code's name, e.g.
    ``internal-error``, ``connection-refused``.
    """

    def __init__(self, message: str, error_code: str = "internal-error") -> None:
        super().__init__(message)
        self.error_code = error_code


class TokenLimitReached(ToolError):
    """``agent.chat`` was refused: the run's token budget is spent. The host
    ends the run with outcome ``token_limit`` after this step; a strategy's
    ``step`` that lets it escape returns its text as the step's result."""
