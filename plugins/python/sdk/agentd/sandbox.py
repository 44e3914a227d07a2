"""The run's sandbox (the contract's ``sandbox`` interface) with Python
types: a container created on first use and removed when the run ends;
paths are inside it, relative ones under its work dir.

Every function raises :class:`~agentd.errors.HostError` when the host
refuses or fails (its ``code`` is the host's: ``sandbox-failed``,
``sandbox-unavailable``); a tool that lets it escape returns that error to
the model. A command that runs and fails is not an exception: look at
``exit_code`` (or call :meth:`Output.check`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._bindings import Err, host_error
from .errors import HostError

try:
    from wit_world.imports import sandbox as _sandbox
except ImportError as e:  # a strategy
    raise ImportError(
        "agentd.sandbox needs a tool world (tool or http-tool): strategies reach "
        "the sandbox only through tools"
    ) from e

__all__ = ["DirEntry", "Output", "list_dir", "read_file", "read_text", "restart_shell", "run", "shell", "write_file"]


@dataclass(frozen=True)
class Output:
    """What a command printed and how it ended."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    #: Output past the sandbox's cap was dropped.
    truncated: bool

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def check(self) -> "Output":
        """Itself if the command succeeded, else a ``HostError`` with its
        exit status and stderr."""
        if self.ok:
            return self
        how = "timed out" if self.timed_out else f"exited {self.exit_code}"
        raise HostError(f"command {how}: {self.stderr.strip() or self.stdout.strip()}", code="failed")


@dataclass(frozen=True)
class DirEntry:
    name: str
    is_dir: bool
    size: int


def _output(o) -> Output:
    return Output(o.stdout, o.stderr, o.exit_code, o.timed_out, o.truncated)


def run(command: str, *, workdir: str | None = None, timeout: int | None = None, stdin: str | None = None) -> Output:
    """Runs ``command`` (``sh -c``) as a one-off process. ``timeout`` in
    seconds, clamped by the host to ``[sandbox] timeout``."""
    try:
        return _output(_sandbox.run(_sandbox.Command(command=command, workdir=workdir, timeout_secs=timeout, stdin=stdin)))
    except Err as e:
        raise host_error(e, "sandbox run") from None


def shell(command: str, *, timeout: int | None = None) -> Output:
    """Runs ``command`` in the run's persistent shell (``cd`` and exported
    variables carry over between calls, and between tools)."""
    try:
        return _output(_sandbox.shell(command, timeout))
    except Err as e:
        raise host_error(e, "sandbox shell") from None


def restart_shell() -> None:
    try:
        _sandbox.restart_shell()
    except Err as e:
        raise host_error(e, "sandbox restart-shell") from None


def read_file(path: str) -> bytes:
    try:
        return bytes(_sandbox.read_file(path))
    except Err as e:
        raise host_error(e, f"read {path}") from None


def read_text(path: str, encoding: str = "utf-8") -> str:
    """:func:`read_file` decoded (undecodable bytes replaced)."""
    return read_file(path).decode(encoding, errors="replace")


def write_file(path: str, contents: bytes | str) -> None:
    """Writes ``contents`` (a ``str`` as UTF-8), creating or replacing the file."""
    data = contents.encode("utf-8") if isinstance(contents, str) else bytes(contents)
    try:
        _sandbox.write_file(path, data)
    except Err as e:
        raise host_error(e, f"write {path}") from None


def list_dir(path: str = ".") -> list[DirEntry]:
    try:
        return [DirEntry(e.name, e.is_dir, e.size) for e in _sandbox.list_dir(path)]
    except Err as e:
        raise host_error(e, f"list {path}") from None
