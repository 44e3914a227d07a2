"""The plain settings the operator gave this plugin
(``[plugins.<name>] config = { key = "value" }`` in the daemon's config
file), fixed for a run. Never secrets: those are environment variables
(``[plugins.<name>] secrets``, read with ``os.environ``)."""

from __future__ import annotations

from ._bindings import config_api



def _api():
    if config_api is None:
        raise RuntimeError("agentd.config needs contract 0.2.1 (this component was built against 0.2.0)")
    return config_api


def get(key: str, default: str | None = None) -> str | None:
    """The value set for ``key``, else ``default``."""
    value = _api().get(key)
    return default if value is None else value


def keys() -> list[str]:
    """Every key the operator set, sorted."""
    return list(_api().keys())


def get_int(key: str, default: int) -> int:
    """``key`` as an integer, else ``default``; ``ValueError`` naming the key
    when it is set to something else."""
    value = _api().get(key)
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"config key {key!r} = {value!r} is not an integer") from None
