"""A stdio MCP server's process and pipes, without the `mcp` SDK.

The SDK takes most of a second to import; a server takes about as long to start. So the
hub starts each stdio server at once (`start_server`) while the SDK imports in a worker
thread, and the connection then feeds the SDK's `ClientSession` from the running process
(`stdio_streams`): the first prompt waits for the slower of the two, not for both.

What the server gets is what the SDK's own stdio client gave it: the SDK's few default
variables from our environment with the given environment on top, its own session
(process group), the working directory, and our stderr pipe. The shutdown is the SDK's
too, as the spec asks: close stdin, wait, then end the whole process group (SIGTERM, then
SIGKILL), every wait bounded and shielded so a cancelled caller neither leaks nor hangs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import AsyncResource, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from anyio.streams.text import TextReceiveStream

from ._stderr import StderrPipe
from .specs import McpServerSpec

log = logging.getLogger(__name__)

R = TypeVar("R")
W = TypeVar("W")

INHERITED_VARIABLES = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What the SDK's stdio client passed on from our environment under any given one."""
EXIT_SECONDS = 2.0
"""For the server to exit by itself once its stdin is closed."""
TERM_SECONDS = 2.0
"""After SIGTERM to its process group, before SIGKILL."""
REAP_SECONDS = 2.0
"""For the loop to see a killed server gone; only an unkillable one runs it out."""
FLUSH_SECONDS = 0.5
"""For messages already accepted to reach the server before its stdin closes."""
_POLL_SECONDS = 0.01


def server_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` over the SDK's defaults from `os.environ` (shell functions left out)."""
    defaults = {
        name: value
        for name in INHERITED_VARIABLES
        if (value := os.environ.get(name)) is not None and not value.startswith("()")
    }
    return defaults | dict(env)


@dataclass(eq=False)
class StartedServer:
    """A stdio server's process and stderr pipe, before (or without) an MCP session."""

    process: Process
    stderr: StderrPipe

    async def aclose(self) -> None:
        """Stop a server no connection took over (the hub closed meanwhile): it has no
        session to end, so its process group is ended without a grace period."""
        with anyio.CancelScope(shield=True):
            await stop_process(self.process, grace=0.0)
            self.stderr.discard()


async def start_spec(
    spec: McpServerSpec, tail: deque[str], env: Mapping[str, str], cwd: Path
) -> StartedServer:
    """`spec`'s server started now, its stderr going to `tail` (and our log) once pumped;
    `env`: its base environment, the spec's own goes on top."""
    assert spec.command is not None  # a stdio spec without one has a `problem()`
    pipe = StderrPipe(spec.name, tail)
    return await start_server(spec.command, spec.args, {**env, **spec.env}, cwd, pipe)


async def start_server(
    command: str, args: Sequence[str], env: Mapping[str, str], cwd: Path, stderr: StderrPipe
) -> StartedServer:
    """The server's process, started now; raises `OSError` when it cannot start."""
    try:
        process = await anyio.open_process(
            [command, *args],
            env=server_environment(env),
            stderr=stderr.writer,
            cwd=cwd,
            start_new_session=True,  # its own process group, ended as one
        )
    except BaseException:
        stderr.discard()
        raise
    finally:
        stderr.close_writer()  # the child has its copy
    return StartedServer(process, stderr)


@contextlib.asynccontextmanager
async def stdio_streams(
    process: Process, parse: Callable[[str], R], dump: Callable[[W], str]
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[R | Exception], MemoryObjectSendStream[W]]]:
    """The running server's stdout as parsed messages (a line `parse` refuses comes as its
    exception) and a stream whose messages `dump` writes to its stdin, one a line; the
    server is stopped on the way out."""
    # No await before the task group is entered: a cancel there would leak the process.
    read_writer, read_stream = anyio.create_memory_object_stream[R | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[W](0)
    writer_done = anyio.Event()
    shutting_down = False

    async def read_stdout() -> None:
        assert process.stdout is not None
        try:
            async with read_writer:
                try:
                    buffer = ""  # one line at a time: nothing read ahead of a blocked send
                    async for chunk in TextReceiveStream(process.stdout, encoding="utf-8"):
                        *lines, buffer = (buffer + chunk).split("\n")
                        for line in lines:
                            try:
                                await read_writer.send(_parsed(parse, line))
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return  # the session is gone
                finally:
                    await _drain(process)
        except anyio.ClosedResourceError:
            pass  # our shutdown closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                log.exception("reading an MCP server's stdout failed")

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    await process.stdin.send((dump(message) + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may live on: end the session's reading, or a request would hang.
            await read_writer.aclose()
        finally:
            writer_done.set()

    async def shut_down() -> None:
        read_stream.close()  # a server stuck writing stdout reads no stdin: drain it
        write_stream.close()
        with anyio.move_on_after(FLUSH_SECONDS):
            await writer_done.wait()
        await stop_process(process)
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()  # the pipe tasks leave by their except paths

    async with anyio.create_task_group() as pipes:
        pipes.start_soon(read_stdout)
        pipes.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):  # every wait in it is bounded
                await shut_down()
            pipes.cancel_scope.cancel()  # a survivor's open pipe end could still block them


def _parsed(parse: Callable[[str], R], line: str) -> R | Exception:
    try:
        return parse(line)
    except ValueError as exc:  # the session reports it; the connection goes on
        log.warning("an MCP server wrote a line that is not JSON-RPC: %s", exc)
        return exc


async def _drain(process: Process) -> None:
    """Read and drop what the server still writes, so it is not stuck on a full pipe when
    it should exit."""
    assert process.stdout is not None
    with (
        anyio.CancelScope(shield=True),
        contextlib.suppress(
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            ConnectionError,
            OSError,
        ),
    ):
        while True:
            await process.stdout.receive()


async def stop_process(process: Process, grace: float = EXIT_SECONDS) -> None:
    """Close its stdin; if it has not exited after `grace` seconds, end its process group."""
    if process.stdin is not None:
        await _close(process.stdin)
    if not await _exited(process, grace):
        await _end_group(process)
        if not await _exited(process, REAP_SECONDS):
            log.warning("MCP server process %d is still alive after SIGKILL", process.pid)
    if process.stdout is not None:
        await _close(process.stdout)  # a survivor may hold the pipe open
    # The asyncio transport stays open (and warns when collected) while a child of the
    # server holds a pipe; nothing public closes it.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):
            close()


async def _close(stream: AsyncResource) -> None:
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    # Polled, not `process.wait()`: that also waits for the pipes' end, which a child of
    # the server may hold open after the server itself exited.
    deadline = anyio.current_time() + seconds
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL_SECONDS)
    return True


async def _end_group(process: Process) -> None:
    """SIGTERM to the server's process group, SIGKILL to what is left after TERM_SECONDS.
    The group id is the server's pid (its own session), valid also once it is reaped."""
    group = process.pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return  # all gone
    except PermissionError:
        log.warning("cannot signal all of process group %d; waiting for it", group)
    with anyio.move_on_after(TERM_SECONDS):
        while _group_alive(group):
            _ = process.returncode  # reaps the leader, whose zombie would keep the group
            await anyio.sleep(_POLL_SECONDS)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # survivors we may not signal, or zombies: not proof it is gone
    return True
