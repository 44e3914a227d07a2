"""Lines in the daemon's log, tagged with the plugin's name (``logging.log``
of the contract). The host rate-limits them per plugin instance; debug and
trace lines are dropped unless the daemon's log level shows them.
``print`` works too (stdout and stderr go to the same log), but has no level.
"""

from __future__ import annotations

from ._bindings import logging_api

_Level = logging_api.Level


def _log(level, parts: tuple) -> None:
    logging_api.log(level, " ".join(str(p) for p in parts))


def trace(*parts: object) -> None:
    _log(_Level.TRACE, parts)


def debug(*parts: object) -> None:
    _log(_Level.DEBUG, parts)


def info(*parts: object) -> None:
    _log(_Level.INFO, parts)


def warn(*parts: object) -> None:
    _log(_Level.WARN, parts)


warning = warn


def error(*parts: object) -> None:
    _log(_Level.ERROR, parts)
