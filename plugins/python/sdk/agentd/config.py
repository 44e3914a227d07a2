"""The plain settings the operator gave this plugin
(``[plugins.<name>] config = { key = "value" }`` in the daemon's config
file), fixed for a run. Never secrets: those are environment variables
(``[plugins.<name>] secrets``, read with ``os.environ``)."""

from __future__ import annotations

from ._bindings import config_api


def _get(key: str):
    # A component built against contract 0.2.0 has no `config` import: its
    # operator can set nothing, so every key is unset.
    return None if config_api is None else config_api.get(key)


def get(key: str, default: str | None = None) -> str | None:
    """The value set for ``key``, else ``default``."""
    value = _get(key)
    return default if value is None else value


def keys() -> list[str]:
    """Every key the operator set, sorted."""
    return [] if config_api is None else list(config_api.keys())


def get_int(key: str, default: int) -> int:
    """``key`` as an integer, else ``default``; ``ValueError`` naming the key
    when it is set to something else."""
    value = _get(key)
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"config key {key!r} = {value!r} is not an integer") from None
