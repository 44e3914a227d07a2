"""Outgoing HTTP for tools of world ``http-tool``, over the standard
``wasi:http/outgoing-handler`` the host provides.

::

    from agentd import http

    r = http.get("https://api.example.com/items", headers={"accept": "application/json"})
    r.status, r.text, r.json()

Synchronous: each call sends the request, blocks on its future
(``subscribe().block()``; the host's epoch deadline still applies, so a
server that never answers ends the step, not the daemon) and reads the body
up to ``max_bytes`` (the rest is not read, and ``truncated`` says so).

Every request is checked by the host against the plugin's
``[plugins.<name>] allow_hosts`` (deny by default). A refused request
raises :class:`~agentd.errors.HttpError` whose text is the host's own
message, naming the host and the key to change; so does any failure before
a response (DNS, connection refused, timeouts). An HTTP status of 4xx or
5xx is a response, not an exception: look at ``status`` (or call
:meth:`Response.raise_for_status`).
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ._bindings import Err
from .errors import HttpError

try:
    from wit_world.imports import http_types as _http
except ImportError:
    try:
        from wit_world.imports import wasi_http_types as _http
    except ImportError as e:
        raise ImportError(
            "agentd.http needs world http-tool (agentd:plugin/http-tool@0.2.1): "
            "build with that world, and grant the hosts in [plugins.<name>] allow_hosts"
        ) from e
from wit_world.imports import outgoing_handler as _handler  # noqa: E402
from wit_world.imports import streams as _streams  # noqa: E402

__all__ = ["DEFAULT_MAX_BYTES", "Response", "get", "request"]

#: The body cap when a call gives none: 1 MiB.
DEFAULT_MAX_BYTES = 1 << 20
# wasi:io output streams take at most 4096 bytes per blocking write.
_WRITE_CHUNK = 4096
_READ_CHUNK = 64 * 1024

_METHODS = {
    "GET": _http.Method_Get,
    "HEAD": _http.Method_Head,
    "POST": _http.Method_Post,
    "PUT": _http.Method_Put,
    "DELETE": _http.Method_Delete,
    "CONNECT": _http.Method_Connect,
    "OPTIONS": _http.Method_Options,
    "TRACE": _http.Method_Trace,
    "PATCH": _http.Method_Patch,
}


@dataclass(frozen=True)
class Response:
    status: int
    #: Header names in lower case, values decoded as latin-1; repeated
    #: headers are joined with ", ".
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    #: The body was longer than ``max_bytes``; ``body`` holds its start.
    truncated: bool = False

    @property
    def text(self) -> str:
        """The body as text (UTF-8, undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self):
        return _json.loads(self.body)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 400

    def raise_for_status(self) -> "Response":
        if not self.ok:
            raise HttpError(f"HTTP {self.status}: {self.text[:200]}", error_code="http-status")
        return self


def get(
    url: str,
    headers: dict[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float | None = None,
) -> Response:
    """``GET url``; see :func:`request`."""
    return request("GET", url, headers=headers, max_bytes=max_bytes, timeout=timeout)


def request(
    method: str,
    url: str,
    headers: dict[str, str] | None = None,
    body: bytes | str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float | None = None,
) -> Response:
    """One request. ``url`` is ``http://`` or ``https://``; ``body`` (a
    ``str`` as UTF-8) is sent with the request; at most ``max_bytes`` of the
    response body are read. ``timeout`` (seconds) bounds connecting, the
    first byte and each pause between bytes (the host may bound them more).
    Raises :class:`HttpError` when no response comes, and ``ValueError``
    for a URL or method it cannot send."""
    if max_bytes < 0:
        raise ValueError("max_bytes must be >= 0")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{url!r}: only http:// and https:// URLs can be fetched")
    if not parts.netloc or parts.hostname is None:
        raise ValueError(f"{url!r}: no host")
    authority = parts.netloc.rsplit("@", 1)[-1]  # user:password@ is never sent
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    # What messages name: no user, no query (either may hold a key), since
    # a message can end up in a tool result, the history and the API.
    shown = f"{scheme}://{parts.hostname}{':' + str(parts.port) if parts.port else ''}{parts.path or '/'}"

    fields = [(k.lower(), v.encode("latin-1")) for k, v in (headers or {}).items()]
    try:
        header_fields = _http.Fields.from_list(fields)
    except Err as e:
        raise ValueError(f"invalid request headers: {type(e.value).__name__}") from None

    req = _http.OutgoingRequest(header_fields)
    m = method.upper()
    req.set_method(_METHODS[m]() if m in _METHODS else _http.Method_Other(m))
    req.set_scheme(_http.Scheme_Https() if scheme == "https" else _http.Scheme_Http())
    req.set_authority(authority)
    req.set_path_with_query(path)

    data = body.encode("utf-8") if isinstance(body, str) else body
    out_body = req.body() if data is not None else None
    options = _options(timeout)
    try:
        future = _handler.handle(req, options)
    except Err as e:
        raise _http_error(e.value, shown) from None

    with future:
        if out_body is not None:
            _send_body(out_body, data or b"", shown)
        with future.subscribe() as ready:
            ready.block()
        got = future.get()
    if got is None:  # cannot happen after block(); be explicit anyway
        raise HttpError(f"{shown}: no response")
    if isinstance(got, Err):
        raise HttpError(f"{shown}: the response was already taken")
    inner = got.value
    if isinstance(inner, Err):
        raise _http_error(inner.value, url)
    with inner.value as response:
        status = response.status()
        with response.headers() as fields_in:
            entries = fields_in.entries()
        try:
            incoming = response.consume()
        except Err:
            raise HttpError(f"{shown}: the response body was already taken") from None
        content, truncated = _read_body(incoming, max_bytes, shown)
    return Response(status=status, headers=_headers(entries), body=content, truncated=truncated)


def _options(timeout: float | None):
    if timeout is None:
        return None
    ns = max(1, int(timeout * 1_000_000_000))
    options = _http.RequestOptions()
    for setter in (options.set_connect_timeout, options.set_first_byte_timeout, options.set_between_bytes_timeout):
        try:
            setter(ns)
        except Err:
            pass  # this host does not support the option: its own bound applies
    return options


def _send_body(out_body, data: bytes, url: str) -> None:
    try:
        with out_body.write() as stream:
            for start in range(0, len(data), _WRITE_CHUNK):
                stream.blocking_write_and_flush(data[start : start + _WRITE_CHUNK])
        _http.OutgoingBody.finish(out_body, None)
    except Err as e:
        raise HttpError(f"{url}: sending the request body failed: {_describe(e.value)}") from None


def _read_body(incoming, max_bytes: int, url: str) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    truncated = False
    with incoming:
        with incoming.stream() as stream:
            while True:
                want = min(_READ_CHUNK, max_bytes - size + 1)
                try:
                    chunk = stream.blocking_read(want)
                except Err as e:
                    if isinstance(e.value, _streams.StreamError_Closed):
                        break
                    raise HttpError(f"{url}: reading the body failed: {_describe(e.value)}") from None
                if size + len(chunk) > max_bytes:
                    chunks.append(chunk[: max_bytes - size])
                    size = max_bytes
                    truncated = True
                    break
                chunks.append(chunk)
                size += len(chunk)
    return b"".join(chunks), truncated


def _headers(entries) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in entries:
        text = bytes(value).decode("latin-1")
        key = name.lower()
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


def _describe(value) -> str:
    """A ``wasi:http`` error-code (or stream error) as text: the host's own
    message where it gave one (``internal-error(some(message))``)."""
    payload = getattr(value, "value", None)
    if isinstance(payload, str) and payload:
        return payload
    name = type(value).__name__
    kind = name.split("_", 1)[-1] if "_" in name else name
    words = "".join("-" + c.lower() if c.isupper() else c for c in kind).lstrip("-")
    if payload is not None and not isinstance(payload, str):
        return f"{words} ({payload!r})"
    return words


def _http_error(value, url: str) -> HttpError:
    name = type(value).__name__
    kind = name.split("_", 1)[-1] if "_" in name else name
    code = "".join("-" + c.lower() if c.isupper() else c for c in kind).lstrip("-")
    if isinstance(value, _http.ErrorCode_InternalError) and value.value:
        # The host's refusal (allow_hosts) comes this way: its text as is.
        return HttpError(value.value, error_code=code)
    return HttpError(f"{url}: {_describe(value)}", error_code=code)
