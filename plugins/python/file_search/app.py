# world: tool
"""file_search: grep over the run's work dir, through the sandbox.

The search runs inside the run's container (busybox or GNU grep), so it
sees exactly the files the run's other tools wrote there.
Operator settings (``[plugins.file_search] config``): ``max_results_limit``
(default 1000), the most lines a call may ask for.
"""

import shlex

from agentd import InvalidInput, ToolError, config, sandbox
from agentd.tool import ToolApi, tool  # noqa: F401  (ToolApi: the export componentize-py looks for)

# Marks the line where the command below reports grep's own exit status.
_STATUS = "__file_search_grep_status="


@tool(version="0.1.0")
def file_search(
    pattern: str,
    path: str = ".",
    max_results: int = 50,
    ignore_case: bool = False,
    fixed_strings: bool = False,
) -> str:
    """Searches the files under a path of the sandbox's work dir for lines matching a pattern, like `grep -rn`, and lists them as path:line:text.

    Args:
        pattern: What to look for: an extended regular expression, or plain text with fixed_strings.
        path: The file or folder to search, relative to the work dir (default: the whole work dir).
        max_results: At most this many matching lines are listed.
        ignore_case: Match upper and lower case alike.
        fixed_strings: Take the pattern as plain text, not as a regular expression.
    """
    if not pattern:
        raise InvalidInput("pattern is empty")
    limit = config.get_int("max_results_limit", 1000)
    if not 1 <= max_results <= limit:
        raise InvalidInput(f"max_results must be between 1 and {limit}")
    flags = "-rn" + ("i" if ignore_case else "") + ("F" if fixed_strings else "E")
    # grep's own status goes to stderr past `head`, which ends the pipe once
    # enough lines came (so a huge match list is never sent back whole).
    command = (
        f"{{ grep {flags} -e {shlex.quote(pattern)} -- {shlex.quote(path)}; "
        f'echo "{_STATUS}$?" >&2; }} | head -n {max_results + 1}'
    )
    out = sandbox.run(command, timeout=30)
    status = _grep_status(out.stderr)
    errors = "\n".join(l for l in out.stderr.splitlines() if not l.startswith(_STATUS)).strip()
    if out.timed_out:
        raise ToolError(f"the search timed out after 30 s; search a smaller path than {path!r}")
    lines = out.stdout.splitlines()
    if status == 1 or (status is None and not lines):
        return f"no matches for {pattern!r} in {path}"
    if status not in (0, None) and not lines:
        # 2: a path that does not exist, an invalid pattern.
        raise ToolError(errors or f"grep failed with status {status}")
    shown = lines[:max_results]
    text = "\n".join(shown)
    if len(lines) > max_results:
        text += f"\n(more than {max_results} matches; showing the first {max_results})"
    return text


def _grep_status(stderr: str):
    for line in stderr.splitlines():
        if line.startswith(_STATUS):
            try:
                return int(line[len(_STATUS):])
            except ValueError:
                return None
    return None
