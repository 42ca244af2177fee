"""Local stand-ins for what a client may not offer: files on our own disk, commands as our own
subprocesses.

Used only when the client did not advertise `fs/*` or `terminal`. Paths arrive resolved and
already past the permission policy (outside the session roots only with the user's consent).

Subprocesses never inherit our stdout: fd 1 carries protocol frames. Each command runs in its
own session (so its own process group): a timeout or a cancellation ends the whole group,
grandchildren included (terminate, brief shielded wait, kill).
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import signal
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ..child_env import child_environment
from ._output import OutputCapture
from .base import ToolFailed

log = logging.getLogger(__name__)

TERMINATE_GRACE_SECONDS = 1.0
"""How long a terminated command group may take to exit before it is killed."""
DRAIN_SECONDS = 0.5
"""How long to keep reading after the command exited, while leftovers still hold the pipe."""
READ_CHUNK_BYTES = 65536


# --- files ---------------------------------------------------------------------------------


class LocalEditor:
    """The file half of `Editor`, on the local disk.

    Reads keep line endings as they are (`newline=""`) so an edit written back does not turn
    CRLF files into LF ones.
    """

    can_read_files = True
    can_write_files = True
    can_run_terminals = False

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        """Lines `line` (1-based) onwards, at most `limit` of them; bad bytes become U+FFFD."""
        first = line or 1
        try:
            async with await anyio.open_file(
                path, encoding="utf-8", errors="replace", newline=""
            ) as handle:
                lines: list[str] = []
                number = 0
                async for text in handle:
                    number += 1
                    if number >= first:
                        lines.append(text)
                        if limit is not None and len(lines) >= limit:
                            break
                return "".join(lines)
        except OSError as exc:
            raise _file_error(path, exc, "read") from None

    async def read_exact(self, path: str) -> str | None:
        """The whole file as strict UTF-8, or None when it does not exist.

        Strict, because the caller writes the text back: replacement characters would
        silently corrupt a file in another encoding.
        """
        try:
            async with await anyio.open_file(path, encoding="utf-8", newline="") as handle:
                return await handle.read()
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            raise ToolFailed(f"{path} is not UTF-8 text; it cannot be edited here") from None
        except OSError as exc:
            raise _file_error(path, exc, "read") from None

    async def write_text_file(self, path: str, content: str) -> None:
        try:
            await anyio.to_thread.run_sync(_write_atomically, Path(path), content)
        except OSError as exc:
            raise _file_error(path, exc, "write") from None


def _write_atomically(path: Path, content: str) -> None:
    """Write via a temporary file and a rename: a crash leaves the old file or the new one.

    A symlink is followed (the link stays a link) and an existing file keeps its mode.
    """
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        else:
            # mkstemp creates 0600 files; a new file should get the usual umask-based mode.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _file_error(path: str, exc: OSError, verb: str) -> ToolFailed:
    if isinstance(exc, FileNotFoundError):
        return ToolFailed(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return ToolFailed(f"{path} is a directory, not a file")
    if isinstance(exc, PermissionError):
        return ToolFailed(f"cannot {verb} {path}: permission denied")
    return ToolFailed(f"cannot {verb} {path}: {exc.strerror or exc}")


# --- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommandResult:
    output: str
    """Head and tail of the combined stdout and stderr (see `OutputCapture`)."""
    exit_code: int | None
    signal: str | None
    timed_out: bool
    total_bytes: int
    omitted_bytes: int
    """Bytes of output left out between the head and the tail."""


OutputSink = Callable[[str], Awaitable[None]]


async def run_local_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    # What `env` adds to: a `child_environment` (ToolContext.child_env); None: ours, cleaned.
    base_env: Mapping[str, str] | None = None,
    time_limit: float,
    on_output: OutputSink,
    head_bytes: int,
    tail_bytes: int,
    stream_limit: int,
    stop: anyio.Event | None = None,
) -> CommandResult:
    """Run `argv` in its own process group; stdout and stderr merged, stdin empty.

    New output goes to `on_output` as it arrives (at most `stream_limit` bytes of it, so a
    chatty command cannot flood the client). After `time_limit` seconds the group is
    terminated and the result says so; on cancellation the group is terminated and
    cancellation propagates. Once `stop` is set the group is terminated (the user stopped
    the command): the result is its end, by its signal. Processes the command leaves
    behind are ended once it exits.
    """
    capture = OutputCapture(head_bytes, tail_bytes)
    process = await open_command(argv, cwd=cwd, env=env, base_env=base_env)

    async def pump(reader_done: anyio.Event) -> None:
        await _pump(process, capture, on_output, stream_limit, reader_done)

    timed_out = await supervise(process, pump, time_limit, stop)
    code = process.returncode
    return CommandResult(
        output=capture.text(),
        exit_code=code if code is not None and code >= 0 else None,
        signal=_signal_name(-code) if code is not None and code < 0 else None,
        timed_out=timed_out,
        total_bytes=capture.total,
        omitted_bytes=capture.omitted,
    )


OutputPump = Callable[[anyio.Event], Coroutine[Any, Any, None]]
"""Reads a process's output until its pipe closes, then sets the event it is given."""


async def supervise(
    process: anyio.abc.Process,
    pump: OutputPump,
    time_limit: float,
    stop: anyio.Event | None = None,
) -> bool:
    """Wait for `process` (its own group) while `pump` reads its output; True when
    `time_limit` ended it. Once `stop` is set, or on cancellation, the group is terminated;
    what the command leaves behind in its group is ended once it exits; the process is
    always closed."""
    timed_out = False
    try:
        async with anyio.create_task_group() as group:
            reader_done = anyio.Event()
            group.start_soon(pump, reader_done)
            if stop is not None:
                group.start_soon(_terminate_when, stop, process)
            with anyio.move_on_after(time_limit) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                await terminate_group(process)
            # Leftover background processes keep the pipe open: read what they already
            # wrote, then end them so the command does not outlive its tool call.
            with anyio.move_on_after(DRAIN_SECONDS):
                await reader_done.wait()
            signal_group(process, signal.SIGKILL)
            group.cancel_scope.cancel()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await terminate_group(process)
        raise
    finally:
        # Bounded: a process stuck in the kernel must not hang the turn.
        with anyio.move_on_after(TERMINATE_GRACE_SECONDS, shield=True):
            await process.aclose()
    return timed_out


async def _terminate_when(stop: anyio.Event, process: anyio.abc.Process) -> None:
    await stop.wait()
    await terminate_group(process)


async def open_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    base_env: Mapping[str, str] | None = None,
) -> anyio.abc.Process:
    """Start `argv` in its own session (so its own process group), stdin empty, stdout and
    stderr merged into one pipe, its environment `env` over `base_env` (None: ours,
    cleaned); `ToolFailed` when it cannot start. The caller ends the group."""
    await anyio.lowlevel.checkpoint_if_cancelled()  # cancelled before the start: start nothing
    try:
        opening = anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**(child_environment(os.environ) if base_env is None else base_env), **env},
            start_new_session=True,
        )
        return await _started(opening)
    except OSError as exc:
        raise ToolFailed(f"cannot start {argv[0]}: {exc.strerror or exc}") from None


async def _started(opening: Awaitable[anyio.abc.Process]) -> anyio.abc.Process:
    """The started command, whatever cancel lands meanwhile (the caller's next checkpoint
    sees it, and the caller then ends the whole group).

    asyncio forks the command first and connects its pipes after: a cancel landing in
    between made it kill the group leader alone and hand us nothing, so the leader's
    children (`sleep 30 & wait`) ran on, orphaned, in a group nobody would signal.
    """
    with anyio.CancelScope(shield=True):
        process = await opening
    return process


async def _pump(
    process: anyio.abc.Process,
    capture: OutputCapture,
    on_output: OutputSink,
    stream_limit: int,
    done: anyio.Event,
) -> None:
    """Copy the command's output into `capture` and, decoded, to `on_output`."""
    assert process.stdout is not None
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    streamed = 0
    try:
        async for chunk in process.stdout:
            capture.add(chunk)
            if streamed >= stream_limit:
                continue
            text = decoder.decode(chunk[: stream_limit - streamed])
            streamed += len(chunk)
            if streamed >= stream_limit:
                text += "\n[live output stops here; the command goes on]\n"
            if text:
                await on_output(text)
        if streamed < stream_limit and (rest := decoder.decode(b"", final=True)):
            await on_output(rest)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        done.set()


async def terminate_group(
    process: anyio.abc.Process, grace: float = TERMINATE_GRACE_SECONDS
) -> None:
    """SIGTERM the command's process group, wait up to `grace` seconds (shielded), then
    SIGKILL it."""
    if process.returncode is None:
        signal_group(process, signal.SIGTERM)
        with anyio.move_on_after(grace, shield=True):
            await process.wait()
    # Members of the group may outlive its leader (or ignore SIGTERM): end them all.
    signal_group(process, signal.SIGKILL)
    with anyio.move_on_after(grace, shield=True):
        await process.wait()


def signal_group(process: anyio.abc.Process, number: signal.Signals) -> None:
    """Signal the child's whole process group (it started its own session, so the group id
    is its pid); one already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, number)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


__all__ = [
    "CommandResult",
    "LocalEditor",
    "OutputCapture",
    "open_command",
    "run_local_command",
    "signal_group",
    "terminate_group",
]
