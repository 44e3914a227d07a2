"""The generated bindings every world has, under stable names.

componentize-py names the module of ``agentd:plugin/types`` ``types`` when
the world has one interface called ``types`` (worlds ``tool`` and
``strategy``) and ``agentd_plugin_types`` when another package has one too
(``http-tool``, where ``wasi:http/types`` also exists). Both are tried here,
at import time, which is build time: componentize-py snapshots the module
after running its top level, and an import attempted later, inside a call,
finds no files to read (the component has no filesystem).
"""

try:
    from wit_world.imports import agentd_plugin_types as types  # noqa: F401
except ImportError:  # worlds `tool` and `strategy`
    try:
        from wit_world.imports import types  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "agentd: no generated bindings (wit_world): build this module with "
            "componentize-py against a world of wit/since_v0.2.2 "
            "(plugins/python/build.sh does)"
        ) from e

from componentize_py_types import Err  # noqa: E402,F401
from wit_world.imports import logging as logging_api  # noqa: E402,F401

try:
    from wit_world.imports import config as config_api  # noqa: F401
except ImportError:  # a world of contract 0.2.0, which has no `config`
    config_api = None

try:
    from wit_world.imports import human as human_api  # noqa: F401
except ImportError:  # a world of a contract before 0.2.2, which has no `human`
    human_api = None

from .errors import HostError, ToolError  # noqa: E402


def error_code(name: str):
    """The contract's ``error-code`` for its WIT name (``invalid-input``);
    ``failed`` for a name the contract does not have."""
    member = name.strip().upper().replace("-", "_")
    return getattr(types.ErrorCode, member, types.ErrorCode.FAILED)


def code_name(code) -> str:
    """The WIT name of an ``error-code`` value (``sandbox-failed``)."""
    return code.name.lower().replace("_", "-")


def to_err(e: BaseException) -> Err:
    """The contract error result for an exception a plugin raised: its code
    if it is a :class:`ToolError`, else ``failed``; its text as the message
    (the exception's type when it has no text)."""
    if isinstance(e, Err) and isinstance(e.value, types.Error):
        return e
    code = e.code if isinstance(e, ToolError) else "failed"
    message = str(e) or type(e).__name__
    return Err(types.Error(code=error_code(code), message=message))


def host_error(e: Err, what: str) -> HostError:
    """A host import's ``Err(error)`` as a Python exception, keeping the
    host's code, the message prefixed with the operation."""
    value = e.value
    if isinstance(value, types.Error):
        return HostError(f"{what}: {value.message}", code=code_name(value.code))
    return HostError(f"{what}: {value!r}")
