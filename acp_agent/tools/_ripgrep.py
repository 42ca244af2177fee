"""The search child process: ripgrep, or our Python fallback when `rg` is missing.

Either runs in its own process group with a clean environment, stdin from /dev/null and
never our stdout, and speaks ripgrep's output: `--files --null` (paths, NUL-terminated) to
list files, `--json` to report matching lines, so any file name (colons, newlines, bytes
that are not UTF-8) comes back exactly. The output is read as it arrives and handed on one
hit at a time, so the caller can stop once it has enough; then, or on cancellation (the
turn's cancel scope, the search's deadline), the whole group is ended: terminate, a short
shielded wait, kill. Nothing waits on a regex that cannot be interrupted: ripgrep's run in
linear time, and the fallback's `re`, which may backtrack for ages, runs in a process we
can kill.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import anyio
import anyio.abc

from .base import ToolFailed
from .local import signal_group, terminate_group

MAX_FILE_BYTES = 2 * 1024 * 1024
"""Larger files are skipped by content search (logs, data, bundles)."""
BINARY_SNIFF_BYTES = 8192
ALWAYS_SKIPPED = (".git", "node_modules", ".venv")
TERMINATE_GRACE_SECONDS = 0.2
"""A search has nothing to save: a terminated one that does not exit at once is killed."""
MAX_ERROR_BYTES = 2000
FALLBACK_MODULE = "acp_agent.tools._search_worker"


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One search of one directory (or file); `pattern` None lists the files."""

    target: Path
    pattern: str | None
    ignore_case: bool
    name_glob: str | None
    """A glob matched against file names (no `/`): narrows what the child looks at. The
    caller still filters every hit with its own glob semantics."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "target": str(self.target),
                "pattern": self.pattern,
                "ignore_case": self.ignore_case,
                "name_glob": self.name_glob,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> SearchRequest:
        data = json.loads(text)
        return cls(Path(data["target"]), data["pattern"], data["ignore_case"], data["name_glob"])


@dataclass(frozen=True, slots=True)
class Hit:
    path: Path
    line_number: int | None = None
    """None when listing files."""
    text: str = ""


def find_rg() -> str | None:
    """The `rg` binary: beside our interpreter (the `ripgrep` wheel installs it there), in
    the scripts directory of our environment, then on PATH."""
    beside = [str(Path(sys.executable).parent), sysconfig.get_path("scripts")]
    return shutil.which("rg", path=os.pathsep.join(beside)) or shutil.which("rg")


def command_for(request: SearchRequest) -> list[str]:
    """The argv that runs `request`: ripgrep when found, else the fallback worker."""
    rg = find_rg()
    if rg is None:
        # -P: the search runs in the user's project; its files must not shadow our modules.
        return [sys.executable, "-P", "-m", FALLBACK_MODULE, request.to_json()]
    argv = [
        rg,
        "--no-config",  # RIPGREP_CONFIG_PATH could add --follow, --pre (a program) ...
        "--hidden",  # dotfiles are part of a project; the directories below are not
        *(f"--glob=!{name}" for name in ALWAYS_SKIPPED),
        "--no-require-git",  # a .gitignore counts outside a git work tree too
        "--sort=path",  # the same answer every time, whatever is cut
    ]
    if request.name_glob:
        argv += [f"--type-add=chosen:{request.name_glob}", "--type=chosen"]
    if request.pattern is None:
        argv += ["--files", "--null"]
    else:
        argv += ["--json", f"--max-filesize={MAX_FILE_BYTES}", "--regexp", request.pattern]
        if request.ignore_case:
            argv.append("--ignore-case")
    return [*argv, "--", str(request.target)]


async def run_search(
    request: SearchRequest,
    *,
    env: Mapping[str, str],
    on_hit: Callable[[Hit], bool],
) -> None:
    """Run `request` in a child process; `on_hit` gets each hit and returns False to stop.

    A child that fails without any output (a pattern ripgrep rejects) raises `ToolFailed`
    with its message; one that fails after output (an unreadable file) only ends.
    """
    argv = command_for(request)
    parse = _parse_path if request.pattern is None else _parse_match
    separator = b"\0" if request.pattern is None else b"\n"
    await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled before the start: start nothing
    # A file, not a pipe, for stderr: nothing to drain, and no reader to wait for.
    with tempfile.TemporaryFile() as errors:
        # Any directory that exists will do: every path the child gets is absolute.
        process = await _start(argv, request.target.parent, env, errors)
        try:
            produced = await _read_hits(process, separator, parse, on_hit)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await terminate_group(process, TERMINATE_GRACE_SECONDS)
            raise
        finally:
            signal_group(process, signal.SIGKILL)  # whatever happened, none of it stays
            with anyio.move_on_after(TERMINATE_GRACE_SECONDS, shield=True):
                await process.aclose()
        if process.returncode == 2 and not produced:
            errors.seek(0)
            message = errors.read(MAX_ERROR_BYTES).decode("utf-8", errors="replace")
            raise ToolFailed(_failure_message(message))


async def _read_hits(
    process: anyio.abc.Process,
    separator: bytes,
    parse: Callable[[bytes], Hit | None],
    on_hit: Callable[[Hit], bool],
) -> bool:
    """Hand each record's hit to `on_hit` until it says stop or the output ends (then wait
    for the exit); True when there was any output."""
    assert process.stdout is not None
    produced = False
    pending = bytearray()
    async for chunk in process.stdout:
        produced = True
        if separator not in chunk:  # one long line: gather it, without copying it again
            pending += chunk
            continue
        records = (bytes(pending) + chunk).split(separator)
        pending = bytearray(records.pop())
        if not all(map(on_hit, filter(None, map(parse, records)))):
            return produced
    await process.wait()
    return produced


async def _start(
    argv: list[str], cwd: Path, env: Mapping[str, str], errors: IO[bytes]
) -> anyio.abc.Process:
    """The started child, whatever cancel lands meanwhile: the caller's next checkpoint sees
    the cancel and then ends the whole group (see `local._started`)."""
    try:
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,  # never our stdout: it carries the protocol
                stderr=errors,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
            )
    except OSError as exc:
        raise ToolFailed(f"cannot start the search ({argv[0]}): {exc.strerror or exc}") from None
    return process


def _failure_message(stderr: str) -> str:
    message = stderr.strip().removeprefix("rg: ") or "the search failed"
    if "regex parse error" in message:
        return f"grep is not a valid regular expression: {message}"
    return f"the search failed: {message}"


# --- ripgrep's output ------------------------------------------------------------------------


def _parse_path(record: bytes) -> Hit | None:
    return Hit(Path(os.fsdecode(record))) if record else None


def _parse_match(record: bytes) -> Hit | None:
    """A hit from one `--json` line; None for the other messages (begin, end, summary)."""
    try:
        message = json.loads(record)
        if message.get("type") != "match":
            return None
        data = message["data"]
        path = os.fsdecode(_bytes_of(data["path"]))
        text = _bytes_of(data["lines"]).decode("utf-8", errors="replace")
        return Hit(Path(path), int(data["line_number"]), text)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _bytes_of(value: dict[str, str]) -> bytes:
    """ripgrep gives text as `{"text": ...}`, or `{"bytes": base64}` when not UTF-8."""
    if "text" in value:
        return value["text"].encode("utf-8", errors="surrogateescape")
    return base64.b64decode(value["bytes"])


def match_record(path: Path, line_number: int, line: bytes) -> bytes:
    """One `--json` match line, as ripgrep writes it (for the fallback worker)."""
    data = {
        "path": _json_value(os.fsencode(path)),
        "lines": _json_value(line),
        "line_number": line_number,
    }
    return json.dumps({"type": "match", "data": data}).encode() + b"\n"


def _json_value(raw: bytes) -> dict[str, str]:
    try:
        return {"text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"bytes": base64.b64encode(raw).decode("ascii")}


__all__ = ["MAX_FILE_BYTES", "Hit", "SearchRequest", "find_rg", "match_record", "run_search"]
