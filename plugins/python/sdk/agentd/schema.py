"""A function's signature and docstring to a JSON Schema, and the model's
JSON arguments back to Python values for that function.

Plain Python with no generated bindings, so it is unit-tested in CPython
(``plugins/python/sdk/tests``). In a component this runs at build time:
componentize-py runs the app module's top level (where ``@tool`` is applied)
while it builds, and snapshots the result, so a signature this module cannot
describe fails the *build*, naming the parameter, never a call.

Supported annotations: ``str``, ``int``, ``float``, ``bool``, ``list[T]`` (and
``typing.List``), ``dict[str, T]``, ``Optional[T]`` / ``T | None``,
``Literal[...]`` of strings, numbers or booleans, :class:`enum.Enum` subclasses
(by value), and no annotation (any JSON value, passed as is).
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable

from .errors import InvalidInput

_NONE = type(None)
_MISSING = inspect.Parameter.empty


@dataclass(frozen=True)
class Param:
    """One parameter of a tool function."""

    name: str
    annotation: Any
    required: bool
    default: Any
    schema: dict
    # An Optional parameter without a default is not required of the model,
    # but Python still needs a value for it: None when the model leaves it out.
    has_default: bool = True


@dataclass(frozen=True)
class Described:
    """What ``@tool`` needs of a function: its description, the JSON Schema
    of its parameters, and how to read arguments for it."""

    description: str
    parameters: dict
    params: tuple[Param, ...]

    def parameters_json(self) -> str:
        return json.dumps(self.parameters, separators=(",", ":"), sort_keys=False)

    def convert(self, arguments: str) -> dict[str, Any]:
        """The model's JSON arguments (a JSON object as text) as keyword
        arguments, converted to the annotations; :class:`InvalidInput`
        naming the parameter when they do not fit."""
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except ValueError as e:
            raise InvalidInput(f"arguments are not valid JSON: {e}") from None
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise InvalidInput(
                f"arguments must be a JSON object, not {_json_kind(value)}"
            )
        known = {p.name for p in self.params}
        unknown = sorted(k for k in value if k not in known)
        if unknown:
            expected = ", ".join(sorted(known)) or "none"
            raise InvalidInput(
                f"unknown argument{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(k) for k in unknown)} (parameters: {expected})"
            )
        kwargs: dict[str, Any] = {}
        for p in self.params:
            if p.name not in value:
                if p.required:
                    raise InvalidInput(f"missing required argument '{p.name}'")
                if not p.has_default:
                    kwargs[p.name] = None
                continue
            kwargs[p.name] = convert_value(value[p.name], p.annotation, p.name)
        return kwargs


def describe(func: Callable[..., Any]) -> Described:
    """The description and parameters of ``func``: the docstring's first
    paragraph describes the tool, a Google-style ``Args:`` section each
    parameter; the annotations give the types, defaults make a parameter
    optional. ``TypeError`` for a signature a model cannot call."""
    doc = inspect.getdoc(func) or ""
    description, arg_docs = parse_docstring(doc)
    try:
        hints = typing.get_type_hints(func, include_extras=False)
    except Exception as e:  # a forward reference that does not resolve
        raise TypeError(f"{func.__qualname__}: cannot read its annotations: {e}") from e
    params = []
    properties: dict[str, dict] = {}
    required: list[str] = []
    for p in inspect.signature(func).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(
                f"{func.__qualname__}: *{p.name} cannot be described to a model; "
                "name every parameter"
            )
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError(
                f"{func.__qualname__}: parameter '{p.name}' is positional-only; "
                "the model passes arguments by name"
            )
        annotation = hints.get(p.name, _MISSING)
        try:
            schema = schema_for(annotation)
        except TypeError as e:
            raise TypeError(f"{func.__qualname__}: parameter '{p.name}': {e}") from None
        optional_type = _is_optional(annotation)
        has_default = p.default is not _MISSING
        default = p.default if has_default else None
        if has_default and default is not None and _jsonable(default):
            schema["default"] = _json_default(default)
        if p.name in arg_docs:
            schema["description"] = arg_docs[p.name]
        is_required = not has_default and not optional_type
        if is_required:
            required.append(p.name)
        properties[p.name] = schema
        params.append(
            Param(
                name=p.name,
                annotation=annotation,
                required=is_required,
                default=default,
                schema=schema,
                has_default=has_default,
            )
        )
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    parameters["additionalProperties"] = False
    return Described(description=description, parameters=parameters, params=tuple(params))


_ARGS_HEADERS = ("args", "arguments", "parameters", "params")
_OTHER_HEADERS = (
    "returns",
    "return",
    "yields",
    "raises",
    "examples",
    "example",
    "note",
    "notes",
    "attributes",
    "see also",
)
# `name (type): text` or `name: text`
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (lines joined by spaces) and the per-parameter
    texts of a Google-style ``Args:`` section (continuation lines indented
    under their parameter are joined to it)."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    first: list[str] = []
    for line in lines:
        if not line.strip():
            if first:
                break
            continue
        if line.strip().rstrip(":").lower() in _ARGS_HEADERS + _OTHER_HEADERS and line.strip().endswith(":"):
            break
        first.append(line.strip())
    description = " ".join(first)

    args: dict[str, str] = {}
    in_args = False
    arg_indent = None
    current = None
    for line in lines:
        stripped = line.strip()
        header = stripped.rstrip(":").lower()
        if stripped.endswith(":") and not line.startswith((" ", "\t")):
            if header in _ARGS_HEADERS:
                in_args, arg_indent, current = True, None, None
                continue
            if header in _OTHER_HEADERS:
                in_args = False
                continue
        if not in_args:
            continue
        if not stripped:
            current = None
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_args = False
            continue
        if arg_indent is None:
            arg_indent = indent
        m = _ARG_LINE.match(stripped)
        if indent == arg_indent and m:
            current = m.group(1).lstrip("*")
            args[current] = m.group(2).strip()
        elif current is not None and indent > arg_indent:
            args[current] = (args[current] + " " + stripped).strip()
    return description, args


def schema_for(annotation: Any) -> dict:
    """The JSON Schema of one annotation; ``TypeError`` if unsupported."""
    if annotation is _MISSING or annotation is Any:
        return {}
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is list or annotation is typing.List:
        return {"type": "array"}
    if annotation is dict or annotation is typing.Dict:
        return {"type": "object"}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [m.value for m in annotation]
        return _enum_schema(values, annotation.__name__)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list:
        item = args[0] if args else _MISSING
        return {"type": "array", "items": schema_for(item)} if args else {"type": "array"}
    if origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"{annotation}: JSON object keys are strings")
        out: dict[str, Any] = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = schema_for(args[1])
        return out
    if origin is typing.Literal:
        return _enum_schema(list(args), str(annotation))
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in args if a is not _NONE]
        if len(members) == 1:
            return schema_for(members[0])
        return {"anyOf": [schema_for(a) for a in members]}
    raise TypeError(
        f"{annotation!r} is not supported (use str, int, float, bool, list[...], "
        "dict[str, ...], Optional[...], Literal[...] or an Enum)"
    )


def _enum_schema(values: list, what: str) -> dict:
    kinds = {_json_type(v) for v in values}
    if None in kinds:
        raise TypeError(f"{what}: values must be strings, numbers or booleans")
    out: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        out = {"type": kinds.pop(), "enum": values}
    return out


def _json_type(v: Any) -> str | None:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return None


def _is_optional(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return _NONE in typing.get_args(annotation)
    return False


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(_json_default(v))
        return True
    except (TypeError, ValueError):
        return False


def _json_default(v: Any) -> Any:
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, tuple):
        return list(v)
    return v


def _json_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def convert_value(value: Any, annotation: Any, where: str) -> Any:
    """``value`` (decoded JSON) as ``annotation`` asks, or
    :class:`InvalidInput` naming ``where`` (the argument, or a path in it)."""
    if annotation is _MISSING or annotation is Any:
        return value
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        if value is None and _NONE in args:
            return None
        members = [a for a in args if a is not _NONE]
        errors = []
        for member in members:
            try:
                return convert_value(value, member, where)
            except InvalidInput as e:
                errors.append(str(e))
        if len(members) == 1:
            raise InvalidInput(errors[0])
        raise InvalidInput(f"argument '{where}': {_json_kind(value)} fits none of {annotation}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise _wrong(where, "a string", value)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _wrong(where, "a boolean", value)
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        # Models write 3.0 for 3 now and then: an integral float is accepted.
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _wrong(where, "an integer", value)
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _wrong(where, "a number", value)
    if annotation in (list, typing.List) or origin is list:
        if not isinstance(value, list):
            raise _wrong(where, "an array", value)
        if not args:
            return value
        return [convert_value(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if annotation in (dict, typing.Dict) or origin is dict:
        if not isinstance(value, dict):
            raise _wrong(where, "an object", value)
        if len(args) != 2:
            return value
        return {k: convert_value(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if origin is typing.Literal:
        for allowed in args:
            if value == allowed and type(value) is type(allowed):
                return allowed
        raise InvalidInput(
            f"argument '{where}': {json.dumps(value)} is not one of "
            f"{', '.join(json.dumps(a) for a in args)}"
        )
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        for member in annotation:
            if member.value == value and type(member.value) is type(value):
                return member
        raise InvalidInput(
            f"argument '{where}': {json.dumps(value)} is not one of "
            f"{', '.join(json.dumps(m.value) for m in annotation)}"
        )
    raise InvalidInput(f"argument '{where}': cannot convert to {annotation!r}")


def _wrong(where: str, expected: str, value: Any) -> InvalidInput:
    return InvalidInput(f"argument '{where}': expected {expected}, got {_json_kind(value)}")
