# world: http-tool
"""http_get: GET a URL through the host's allow-list, with a size cap.

Needs a grant: ``[plugins.http_get] allow_hosts = ["api.example.com"]``.
Without one every request is refused by the host, and the model sees the
host's message (which names the host and the key).
Operator settings (``[plugins.http_get] config``): ``max_bytes`` (default
65536), the most body bytes returned; ``timeout_secs`` (default 20).
"""

from agentd import InvalidInput, config, http
from agentd.tool import ToolApi, tool  # noqa: F401  (ToolApi: the export componentize-py looks for)


@tool(version="0.1.0")
def http_get(url: str, max_bytes: int = 65536) -> str:
    """Fetches a URL with HTTP GET and returns the status line and the start of the body as text. Only the hosts the operator allowed can be reached.

    Args:
        url: An http:// or https:// URL.
        max_bytes: At most this many bytes of the body are returned.
    """
    cap = config.get_int("max_bytes", 65536)
    if max_bytes < 1:
        raise InvalidInput("max_bytes must be at least 1")
    limit = min(max_bytes, cap)
    timeout = config.get_int("timeout_secs", 20)
    try:
        response = http.get(url, max_bytes=limit, timeout=timeout)
    except ValueError as e:
        raise InvalidInput(str(e)) from None
    kind = response.headers.get("content-type", "unknown type")
    head = f"HTTP {response.status} ({kind}, {len(response.body)} bytes"
    head += f", cut at {limit})" if response.truncated else ")"
    return f"{head}\n\n{response.text}"
