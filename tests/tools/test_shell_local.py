"""shell as a local subprocess, for clients without terminals."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from tool_fakes import Events, FakeEditor, make_context

from acp_agent.messages import TerminalContent, TerminalStream, TextPart, ToolCallUpdated, TurnEvent
from acp_agent.tools import ToolContext
from acp_agent.tools.local import OutputCapture, run_local_command
from acp_agent.tools.shell import LOCAL_HEAD_BYTES, LOCAL_TAIL_BYTES, Shell, ShellParams

pytestmark = pytest.mark.anyio

TOOL = Shell()
HANG_GUARD = 10.0
"""Seconds a test waits before it calls a hang a failure; the commands it stops run for 60."""


def streams(events: Events) -> list[TerminalStream]:
    return [e.terminal for e in events.of(ToolCallUpdated) if e.terminal is not None]


def is_gone(pid: int) -> bool:
    """True when `pid` no longer runs (a zombie left for init to reap counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def started(pid_file: Path) -> bool:
    return pid_file.exists() and pid_file.read_text().endswith("\n")


async def wait_until_gone(pid: int, seconds: float = HANG_GUARD) -> bool:
    with anyio.move_on_after(seconds):
        # Polling: an unrelated process's end has no event to wait on.
        while not is_gone(pid):  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return is_gone(pid)


class OutputWatch(Events):
    """Events that also tell when the command's streamed output holds `lines` full lines."""

    def __init__(self, lines: int) -> None:
        super().__init__()
        self.lines = lines
        self.output = ""
        self.arrived = anyio.Event()

    async def __call__(self, event: TurnEvent) -> None:
        await super().__call__(event)
        if isinstance(event, ToolCallUpdated) and event.terminal and event.terminal.output:
            self.output += event.terminal.output
            if self.output.count("\n") >= self.lines:
                self.arrived.set()


def kill_group_of(pid: int) -> None:
    """Clean-up after a failed test: end whatever still runs in the command's group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def test_output_and_exit_code_reach_the_model_and_stream_to_the_client(
    root: Path, local_ctx: ToolContext, events: Events
) -> None:
    outcome = await TOOL.run(ShellParams(command="echo out; echo err >&2; pwd; exit 3"), local_ctx)

    assert outcome.model_text == f"out\nerr\n{root}\n\n[exit code 3]"
    assert outcome.display == (
        TextPart(f"```\nout\nerr\n{root}\n```"),
        TextPart("Exited with code 3."),
    )
    assert outcome.failed
    assert outcome.raw_output == {
        "exit_code": 3,
        "signal": None,
        "timed_out": False,
        "output_truncated": False,
    }
    terminal = streams(events)
    command = "echo out; echo err >&2; pwd; exit 3"
    opened = TerminalStream("local-call-1", cwd=str(root), command=command, stoppable=True)
    assert terminal[0] == opened
    assert "".join(t.output or "" for t in terminal) == f"out\nerr\n{root}\n"
    assert terminal[-1] == TerminalStream("local-call-1", exited=True, exit_code=3)
    assert events.items[0] == ToolCallUpdated(
        "call-1",
        status="in_progress",
        title="echo out; echo err >&2; pwd; exit 3",
        terminal=terminal[0],
    )


async def test_a_client_showing_terminal_streams_gets_the_terminal_as_content(
    root: Path, local_editor: FakeEditor, events: Events
) -> None:
    ctx = make_context(root, local_editor, events=events, client_shows_terminal_stream=True)

    outcome = await TOOL.run(ShellParams(command="echo hi"), ctx)

    first = events.of(ToolCallUpdated)[0]
    assert first.content == (TerminalContent("local-call-1"),)
    assert first.terminal == TerminalStream(
        "local-call-1", cwd=str(root), command="echo hi", stoppable=True
    )
    assert outcome.display == (TerminalContent("local-call-1"),)
    assert outcome.model_text == "hi\n\n[exit code 0]"


async def test_the_command_gets_no_stdin_and_our_environment(
    local_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_TOOLS_TEST_VAR", "visible")

    outcome = await TOOL.run(ShellParams(command="cat; echo $ACP_TOOLS_TEST_VAR $PAGER"), local_ctx)

    assert outcome.model_text == "visible cat\n\n[exit code 0]"


async def test_a_timeout_ends_the_whole_process_group(root: Path, local_ctx: ToolContext) -> None:
    started = time.monotonic()

    outcome = await TOOL.run(
        ShellParams(
            command="sleep 60 & echo $! > child.pid; echo started; wait", timeout_seconds=0.5
        ),
        local_ctx,
    )

    assert time.monotonic() - started < HANG_GUARD, "the call waited for the 60 s command"
    assert outcome.model_text.startswith("started\n")
    assert outcome.model_text.endswith("[timed out after 0.5 s: the command was stopped]")
    assert await wait_until_gone(int((root / "child.pid").read_text()))


async def test_a_command_ignoring_sigterm_is_killed(root: Path, local_ctx: ToolContext) -> None:
    started = time.monotonic()

    outcome = await TOOL.run(
        ShellParams(command="trap '' TERM; echo $$ > sh.pid; sleep 60", timeout_seconds=0.3),
        local_ctx,
    )

    assert time.monotonic() - started < HANG_GUARD, "the call waited for the 60 s command"
    assert "timed out" in outcome.model_text
    assert await wait_until_gone(int((root / "sh.pid").read_text()))


async def test_background_leftovers_do_not_hold_the_call_and_are_ended(
    root: Path, local_ctx: ToolContext
) -> None:
    started = time.monotonic()

    outcome = await TOOL.run(
        ShellParams(command="sleep 60 & echo $! > bg.pid; echo done"), local_ctx
    )

    assert time.monotonic() - started < HANG_GUARD, "the call waited for the 60 s leftover"
    assert outcome.model_text == "done\n\n[exit code 0]"
    assert await wait_until_gone(int((root / "bg.pid").read_text()))


async def test_cancellation_ends_the_command_and_its_children_and_propagates(
    root: Path, local_editor: FakeEditor
) -> None:
    watch = OutputWatch(lines=2)
    ctx = make_context(root, local_editor, events=watch)
    finished = False

    async def run() -> None:
        nonlocal finished
        await TOOL.run(ShellParams(command="echo $$; sleep 60 & echo $!; wait"), ctx)
        finished = True

    with anyio.fail_after(HANG_GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await watch.arrived.wait()  # the shell and its child both run
            group.cancel_scope.cancel()
    shell, child = (int(line) for line in watch.output.split())

    assert not finished, "the call was cancelled, not finished"
    assert await wait_until_gone(shell)
    assert await wait_until_gone(child)


async def test_a_cancel_landing_while_the_command_is_still_starting_ends_its_whole_group(
    root: Path, local_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncio forks the command first and connects its pipes after: a cancel landing in
    between must still end the command's children, not just (or not even) the shell."""
    real_open_process = anyio.open_process
    scope = anyio.CancelScope()
    opened: list[anyio.abc.Process] = []

    async def open_process_cancelled_midway(*args: Any, **kwargs: Any) -> Any:
        process = await real_open_process(*args, **kwargs)
        opened.append(process)
        with anyio.fail_after(HANG_GUARD):
            # Polling: the command writes the files; nothing else tells us it got that far.
            while not (started(root / "sh.pid") and started(root / "bg.pid")):  # noqa: ASYNC110
                await anyio.sleep(0.01)
        scope.cancel()
        await anyio.lowlevel.checkpoint()  # where the cancel lands, the start still unfinished
        return process

    monkeypatch.setattr(anyio, "open_process", open_process_cancelled_midway)
    command = "echo $$ > sh.pid; sleep 60 & echo $! > bg.pid; wait"
    try:
        with anyio.fail_after(HANG_GUARD), scope:
            await TOOL.run(ShellParams(command=command), local_ctx)
        shell, child = (int((root / name).read_text()) for name in ("sh.pid", "bg.pid"))

        assert scope.cancelled_caught, "the call was cancelled, not finished"
        assert await wait_until_gone(shell)
        assert await wait_until_gone(child)
    finally:
        for process in opened:  # when the tool lost hold of it, the test still cleans up
            kill_group_of(process.pid)
            with anyio.move_on_after(HANG_GUARD, shield=True):
                await process.aclose()


@contextmanager
def captured_fds() -> Iterator[dict[int, Path]]:
    """Point fds 1 and 2 at files for the duration (our fd 1 is the protocol channel)."""
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    files = {fd: Path(tempfile.mkstemp()[1]) for fd in (1, 2)}
    try:
        for fd, path in files.items():
            handle = os.open(path, os.O_WRONLY)
            os.dup2(handle, fd)
            os.close(handle)
        yield files
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


async def test_the_command_never_writes_to_our_stdout_or_stderr(local_ctx: ToolContext) -> None:
    with captured_fds() as files:
        outcome = await TOOL.run(
            ShellParams(command="echo to-stdout; echo to-stderr >&2; ls /nonexistent"),
            local_ctx,
        )

    assert files[1].read_bytes() == b""
    assert files[2].read_bytes() == b""
    assert "to-stdout" in outcome.model_text
    assert "to-stderr" in outcome.model_text


async def test_huge_output_keeps_head_and_tail_in_bounded_memory(local_ctx: ToolContext) -> None:
    command = "printf 'first\\n'; head -c 500000 /dev/zero | tr '\\0' x; printf '\\nlast\\n'"

    outcome = await TOOL.run(ShellParams(command=command), local_ctx)

    text = outcome.model_text
    assert text.startswith("first\n")
    assert "last\n\n[exit code 0]" in text
    omitted = 500000 + len("first\n\nlast\n") - LOCAL_HEAD_BYTES - LOCAL_TAIL_BYTES
    assert f"[output truncated: {omitted} bytes from the middle of the output were left out]" in (
        text
    )
    assert len(text) < 40_000


async def test_a_missing_program_is_a_normal_exit_127(local_ctx: ToolContext) -> None:
    outcome = await TOOL.run(ShellParams(command="no-such-program-xyz"), local_ctx)

    assert "not found" in outcome.model_text
    assert outcome.model_text.endswith("[exit code 127]")


def test_output_capture_keeps_the_first_and_last_bytes() -> None:
    capture = OutputCapture(head=4, tail=3)
    for chunk in (b"ab", b"cdef", b"gh", b"ij"):
        capture.add(chunk)

    assert capture.total == 10
    assert capture.omitted == 3
    assert capture.text() == "abcd\n[... 3 bytes omitted ...]\nhij"


async def test_local_commands_do_not_see_our_api_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("ACP_TEST_VISIBLE", "plain")
    result = await run_local_command(
        ["bash", "-c", "env"],
        cwd=tmp_path,
        env={},
        time_limit=10,
        on_output=_ignore,
        head_bytes=65536,
        tail_bytes=65536,
        stream_limit=0,
    )
    assert "ACP_TEST_VISIBLE=plain" in result.output
    assert "sk-secret-value" not in result.output


async def _ignore(text: str) -> None:
    pass
