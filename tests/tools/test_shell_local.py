"""shell as a local subprocess, for clients without terminals."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from tool_fakes import Events, FakeEditor, make_context

from acp_agent.messages import TerminalContent, TerminalStream, TextPart, ToolCallUpdated
from acp_agent.tools import ToolContext
from acp_agent.tools.local import OutputCapture, run_local_command
from acp_agent.tools.shell import LOCAL_HEAD_BYTES, LOCAL_TAIL_BYTES, Shell, ShellParams

pytestmark = pytest.mark.anyio

TOOL = Shell()


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
    return pid_file.exists() and bool(pid_file.read_text())


async def wait_until_gone(pid: int, seconds: float = 2.0) -> bool:
    with anyio.move_on_after(seconds):
        # Polling: an unrelated process's end has no event to wait on.
        while not is_gone(pid):  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return is_gone(pid)


async def test_output_and_exit_code_reach_the_model_and_stream_to_the_client(
    root: Path, local_ctx: ToolContext, events: Events
) -> None:
    outcome = await TOOL.run(ShellParams(command="echo out; echo err >&2; pwd; exit 3"), local_ctx)

    assert outcome.model_text == f"out\nerr\n{root}\n\n[exit code 3]"
    assert outcome.display == (TextPart(f"```\nout\nerr\n{root}\n```"),)
    terminal = streams(events)
    assert terminal[0] == TerminalStream("local-call-1", cwd=str(root))
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
    assert first.terminal == TerminalStream("local-call-1", cwd=str(root))
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
            command="sleep 30 & echo $! > child.pid; echo started; wait", timeout_seconds=0.5
        ),
        local_ctx,
    )

    assert time.monotonic() - started < 5
    assert outcome.model_text.startswith("started\n")
    assert outcome.model_text.endswith("[timed out after 0.5 s: the command was stopped]")
    assert await wait_until_gone(int((root / "child.pid").read_text()))


async def test_a_command_ignoring_sigterm_is_killed(root: Path, local_ctx: ToolContext) -> None:
    started = time.monotonic()

    outcome = await TOOL.run(
        ShellParams(command="trap '' TERM; echo $$ > sh.pid; sleep 30", timeout_seconds=0.3),
        local_ctx,
    )

    assert time.monotonic() - started < 5
    assert "timed out" in outcome.model_text
    assert await wait_until_gone(int((root / "sh.pid").read_text()))


async def test_background_leftovers_do_not_hold_the_call_and_are_ended(
    root: Path, local_ctx: ToolContext
) -> None:
    started = time.monotonic()

    outcome = await TOOL.run(
        ShellParams(command="sleep 30 & echo $! > bg.pid; echo done"), local_ctx
    )

    assert time.monotonic() - started < 3
    assert outcome.model_text == "done\n\n[exit code 0]"
    assert await wait_until_gone(int((root / "bg.pid").read_text()))


async def test_cancellation_ends_the_command_within_100_ms(
    root: Path, local_ctx: ToolContext
) -> None:
    finished = False

    async def run() -> None:
        nonlocal finished
        await TOOL.run(ShellParams(command="echo $$ > sh.pid; sleep 30"), local_ctx)
        finished = True

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            while not started(root / "sh.pid"):  # noqa: ASYNC110 (the shell writes a file)
                await anyio.sleep(0.01)
            cancelled_at = time.monotonic()
            group.cancel_scope.cancel()
    elapsed = time.monotonic() - cancelled_at

    assert not finished
    assert elapsed < 0.1
    assert await wait_until_gone(int((root / "sh.pid").read_text()))


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
