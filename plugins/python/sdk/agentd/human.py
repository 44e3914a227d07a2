"""Asking the run's operator (the contract's ``human`` interface, 0.2.2):
:func:`ask` puts a question to whoever runs the agent and waits for the
answer, which comes through the daemon's API or ``agentd reply``. The wait
does not count against the step deadline; it has its own limit, the agent's
``input_timeout``. Also importable as ``agentd.ask_human``.
"""

from __future__ import annotations

from ._bindings import Err, human_api, types
from .errors import HostError

__all__ = ["ask"]


def ask(question: str) -> str:
    """Asks ``question`` and returns the answer as the person typed it.

    Raises :class:`~agentd.errors.HostError` with the host's message and
    code when there is no answer: ``failed`` with "no answer within N
    (input_timeout)", ``cancelled`` when the run was cancelled meanwhile,
    ``failed`` when no one can be asked (``agentd plugin call``, a load-time
    probe). A tool that lets it escape returns that text to the model,
    which then goes on without the answer.
    """
    if human_api is None:
        raise HostError(
            "agentd.ask_human needs contract 0.2.2: this component was built against "
            "an older one, which has no `human` interface",
            code="failed",
        )
    try:
        return human_api.ask(question)
    except Err as e:
        value = e.value
        if isinstance(value, types.Error):
            # The host's text as is: it says why ("no answer within 1h
            # (input_timeout)"), which is what the model should read.
            raise HostError(value.message, code=value.code.name.lower().replace("_", "-")) from None
        raise HostError(f"ask_human: {value!r}") from None
