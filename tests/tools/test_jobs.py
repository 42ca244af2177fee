"""Background jobs: `shell` with `background`, `job_output`, `job_kill`, and the session's
jobs table (its notes to the model and its close), locally and in editor terminals."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import signal
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from tool_fakes import Events, FakeEditor, ScriptedTerminal, make_context

from acp_agent.engine import ModelSettings, ModelSetup, Turn
from acp_agent.messages import (
    Message,
    Stop,
    StreamEvent,
    TerminalContent,
    TextPart,
    ToolCallEnd,
    ToolCallPart,
    ToolResultPart,
    TurnEvent,
)
from acp_agent.providers import ModelRequest
from acp_agent.sessions.live import Live, LiveSessions
from acp_agent.sessions.records import SessionHeader
from acp_agent.sessions.session import Session
from acp_agent.sessions.store import SessionStore
from acp_agent.tools import (
    Decision,
    PermissionMemory,
    PermissionQuestion,
    Tool,
    ToolContext,
    ToolFailed,
    ToolOutcome,
    ToolParams,
    decide,
)
from acp_agent.tools._job_table import HEAD_BYTES, TAIL_BYTES, Job, OutputBuffer
from acp_agent.tools.jobs import JobIdParams, JobKill, JobOutput, JobOutputParams
from acp_agent.tools.permissions import PermissionMode
from acp_agent.tools.shell import Shell, ShellParams

pytestmark = pytest.mark.anyio

SHELL, OUTPUT, KILL = Shell(), JobOutput(), JobKill()
HANG_GUARD = 10.0
"""Seconds a test waits before it calls a hang a failure; the jobs it stops run for 600."""
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.01; done"
"""Shell: block until the test creates the file `go` in the cwd."""


@asynccontextmanager
async def jobs_running(ctx: ToolContext) -> AsyncIterator[ToolContext]:
    """`ctx` with a task group for the jobs' watchers (the connection's, in the agent);
    whatever still runs at the end is killed, as when the session closes."""
    with anyio.fail_after(HANG_GUARD):
        async with anyio.create_task_group() as group:
            try:
                yield dataclasses.replace(ctx, background=group)
            finally:
                await ctx.state.jobs.close()


async def start(ctx: ToolContext, command: str, **arguments: Any) -> str:
    outcome = await SHELL.run(ShellParams(command=command, background=True, **arguments), ctx)
    assert outcome.raw_output is not None
    job_id: str = outcome.raw_output["job_id"]
    return job_id


async def read(ctx: ToolContext, job_id: str, wait: float = HANG_GUARD) -> ToolOutcome:
    return await OUTPUT.run(JobOutputParams(job_id=job_id, wait_seconds=wait), ctx)


def job(ctx: ToolContext, job_id: str) -> Job:
    found = ctx.state.jobs.get(job_id)
    assert found is not None
    return found


def is_gone(pid: int) -> bool:
    """True when `pid` no longer runs (a zombie left for init to reap counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


async def wait_until_gone(pid: int) -> bool:
    with anyio.move_on_after(HANG_GUARD):
        # Polling: an unrelated process's end has no event to wait on.
        while not is_gone(pid):  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return is_gone(pid)


def kill_group_of(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


# --- local jobs ----------------------------------------------------------------------------


async def test_the_call_returns_at_once_with_a_job_id_and_the_job_runs_on(
    local_ctx: ToolContext,
) -> None:
    async with jobs_running(local_ctx) as ctx:
        started = time.monotonic()
        outcome = await SHELL.run(ShellParams(command="sleep 600", background=True), ctx)

        assert time.monotonic() - started < HANG_GUARD / 2
        assert outcome.raw_output == {"job_id": "job-1", "background": True, "where": "local"}
        assert "job-1" in outcome.model_text and "job_output" in outcome.model_text
        assert not outcome.failed
        assert job(ctx, "job-1").running


async def test_a_second_read_returns_only_the_output_that_came_after_the_first(
    root: Path, local_ctx: ToolContext
) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, f"echo first; {WAIT_FOR_GO}; echo second; sleep 600")

        first = await read(ctx, job_id)  # waits for the first output
        (root / "go").touch()
        second = await read(ctx, job_id)

    assert first.model_text.startswith("first\n")
    assert "still running" in first.model_text
    assert second.model_text.startswith("second\n")
    assert "first" not in second.model_text
    assert second.raw_output is not None and second.raw_output["new_bytes"] == len("second\n")


async def test_the_exit_status_is_returned_once_the_job_has_ended(local_ctx: ToolContext) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "echo bye; exit 3")
        await job(ctx, job_id).wait_ended()

        outcome = await read(ctx, job_id, wait=0)
        again = await read(ctx, job_id, wait=0)

    assert outcome.model_text.startswith("bye\n")
    assert "exit 3" in outcome.model_text
    assert outcome.raw_output is not None
    assert (outcome.raw_output["running"], outcome.raw_output["exit_code"]) == (False, 3)
    assert again.model_text.startswith("(no new output)")
    assert "exit 3" in again.model_text


async def test_wait_seconds_returns_as_soon_as_output_arrives(
    root: Path, local_ctx: ToolContext
) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, f"{WAIT_FOR_GO}; echo late; sleep 600")
        answers: list[ToolOutcome] = []

        async def wait_long() -> None:
            answers.append(await read(ctx, job_id, wait=60))

        async with anyio.create_task_group() as group:
            group.start_soon(wait_long)
            await anyio.wait_all_tasks_blocked()  # the read waits on the job now
            assert answers == []
            began = time.monotonic()
            (root / "go").touch()
        waited = time.monotonic() - began

    [answer] = answers
    assert answer.model_text.startswith("late\n")
    assert waited < HANG_GUARD, "the read waited for its whole 60 s"


async def test_without_wait_seconds_the_read_answers_at_once(local_ctx: ToolContext) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "sleep 600")
        began = time.monotonic()

        outcome = await read(ctx, job_id, wait=0)

    assert time.monotonic() - began < HANG_GUARD / 2
    assert outcome.model_text.startswith("(no new output)")
    assert "job-1 still running" in outcome.model_text


async def test_long_output_keeps_its_head_and_tail_and_says_what_was_dropped(
    local_ctx: ToolContext,
) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "seq 1 200000")  # ~1.2 MB
        await job(ctx, job_id).wait_ended()

        outcome = await read(ctx, job_id, wait=0)

    text = outcome.model_text
    assert text.startswith("1\n2\n3\n")
    assert "\n200000\n" in text
    assert "bytes from the middle were not kept" in text
    assert len(text) < 30_000, "one read is cut to a head and a tail for the model"
    assert outcome.raw_output is not None
    assert outcome.raw_output["dropped_bytes"] > 1_000_000
    assert outcome.raw_output["exit_code"] == 0


async def test_a_character_cut_between_two_reads_arrives_whole(
    root: Path, local_ctx: ToolContext
) -> None:
    async with jobs_running(local_ctx) as ctx:
        # é is two bytes: the job prints the first, waits, then the second.
        job_id = await start(ctx, rf"printf 'a\xc3'; {WAIT_FOR_GO}; printf '\xa9b'; sleep 600")
        first = await read(ctx, job_id)
        (root / "go").touch()
        second = await read(ctx, job_id)

    assert first.model_text.startswith("a\n")
    assert second.model_text.startswith("éb\n")


@needs_proc
async def test_job_kill_ends_the_whole_process_group_grandchildren_included(
    local_ctx: ToolContext,
) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "sleep 600 & echo $$ $!; wait")
        first = await read(ctx, job_id)
        shell, grandchild = (int(word) for word in first.model_text.split()[:2])
        try:
            assert not is_gone(shell) and not is_gone(grandchild)

            outcome = await KILL.run(JobIdParams(job_id=job_id), ctx)
        finally:
            kill_group_of(shell)

    assert await wait_until_gone(shell)
    assert await wait_until_gone(grandchild)
    assert outcome.raw_output is not None and outcome.raw_output["killed"] is True
    assert "killed" in outcome.model_text
    assert ctx.state.jobs.take_ended_notes() == [], "the model knows: it killed the job"


async def test_job_kill_of_a_job_that_had_ended_is_no_error(local_ctx: ToolContext) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "echo done")
        await job(ctx, job_id).wait_ended()

        outcome = await KILL.run(JobIdParams(job_id=job_id), ctx)

    assert outcome.model_text.startswith("done\n")
    assert "exit 0" in outcome.model_text
    assert "had already ended" in outcome.model_text


@needs_proc
async def test_closing_the_jobs_kills_every_running_job_and_no_new_one_starts(
    local_ctx: ToolContext,
) -> None:
    async with jobs_running(local_ctx) as ctx:
        pids = []
        for _ in range(2):
            job_id = await start(ctx, "echo $$; sleep 600")
            pids.append(int((await read(ctx, job_id)).model_text.split()[0]))

        await ctx.state.jobs.close()

        assert not ctx.state.jobs.running
        with pytest.raises(ToolFailed, match="ending"):
            await start(ctx, "echo too late")
    for pid in pids:
        assert await wait_until_gone(pid)


async def test_a_job_with_a_timeout_is_stopped_after_it(local_ctx: ToolContext) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "sleep 600", timeout_seconds=0.2)
        await job(ctx, job_id).wait_ended()
        outcome = await read(ctx, job_id, wait=0)

    assert "timed out" in outcome.model_text


async def test_a_job_gets_the_same_child_environment_as_a_foreground_command(
    root: Path, local_editor: FakeEditor
) -> None:
    clean = {"PATH": os.environ["PATH"], "ONLY_THIS": "kept"}
    base = dataclasses.replace(make_context(root, local_editor), child_env=clean)
    async with jobs_running(base) as ctx:
        job_id = await start(ctx, "env | sort")
        await job(ctx, job_id).wait_ended()
        outcome = await read(ctx, job_id, wait=0)
    foreground = await SHELL.run(ShellParams(command="env | sort"), base)

    variables = {line.split("=", 1)[0] for line in outcome.model_text.splitlines() if "=" in line}
    expected = {line.split("=", 1)[0] for line in foreground.model_text.splitlines() if "=" in line}
    assert "ONLY_THIS" in variables and "PAGER" in variables
    assert variables == expected


async def test_a_job_runs_in_the_cwd_it_was_given_inside_the_workspace_only(
    root: Path, tmp_path: Path, local_ctx: ToolContext
) -> None:
    (root / "sub").mkdir()
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "pwd", cwd="sub")
        await job(ctx, job_id).wait_ended()
        outcome = await read(ctx, job_id, wait=0)
        with pytest.raises(ToolFailed, match="outside the workspace"):
            await start(ctx, "pwd", cwd=str(tmp_path))

    assert outcome.model_text.startswith(f"{root / 'sub'}\n")
    assert len(ctx.state.jobs) == 1


async def test_a_session_with_a_running_job_is_not_let_go_over_the_live_limit(
    tmp_path: Path, local_ctx: ToolContext
) -> None:
    store = SessionStore(tmp_path / "store")
    live = LiveSessions(limit=1)
    entries = []
    for session_id in ("with-job", "without"):
        header = SessionHeader(session_id, "/w", (), "2025-01-01T00:00:00.000000Z")
        session = Session(session_id, Path("/w"), (Path("/w"),), "echo/echo")
        entries.append(Live(session, store.create(header)))
        live.add(entries[-1])
    with_job = entries[0].session
    async with jobs_running(dataclasses.replace(local_ctx, state=with_job.tool_state)) as ctx:
        job_id = await start(ctx, "sleep 600")

        assert live.next_to_let_go() == "without", "the older one runs a job: it stays"

        await KILL.run(JobIdParams(job_id=job_id), ctx)
        assert live.next_to_let_go() == "with-job"
    for entry in entries:
        entry.close()


# --- what the model is told ----------------------------------------------------------------


async def test_an_unknown_job_id_is_a_clear_tool_error(local_ctx: ToolContext) -> None:
    async with jobs_running(local_ctx) as ctx:
        with pytest.raises(ToolFailed, match="no background job was started"):
            await read(ctx, "job-1", wait=0)
        await start(ctx, "sleep 600")
        with pytest.raises(ToolFailed, match=r"There is no job 'job-9'\. Jobs: job-1 \(running\)"):
            await read(ctx, "job-9", wait=0)
        with pytest.raises(ToolFailed, match="no job 'nope'"):
            await KILL.run(JobIdParams(job_id="nope"), ctx)


async def test_a_job_that_ended_unread_is_noted_once(local_ctx: ToolContext) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "echo done; exit 2")
        await job(ctx, job_id).wait_ended()

        notes = ctx.state.jobs.take_ended_notes()
        later = ctx.state.jobs.take_ended_notes()

    assert notes == [
        "[job job-1 (`echo done; exit 2`) ended: exit 2; job_output job-1 for its output]"
    ]
    assert later == []


async def test_a_job_whose_end_the_model_read_is_not_noted(local_ctx: ToolContext) -> None:
    async with jobs_running(local_ctx) as ctx:
        job_id = await start(ctx, "true")
        await job(ctx, job_id).wait_ended()
        await read(ctx, job_id, wait=0)

        assert ctx.state.jobs.take_ended_notes() == []


async def test_the_jobs_listing_for_the_user_names_state_command_and_output(
    local_ctx: ToolContext,
) -> None:
    assert local_ctx.state.jobs.describe() == "No background jobs in this session."
    async with jobs_running(local_ctx) as ctx:
        ended = await start(ctx, "echo hello; exit 4")
        await job(ctx, ended).wait_ended()
        await start(ctx, "sleep 600")

        listing = ctx.state.jobs.describe()

    assert listing.splitlines() == [
        "Background jobs:",
        "- job-1: exit 4, 0 s, 6 bytes of output: `echo hello; exit 4`",
        "- job-2: running, 0 s, 0 bytes of output: `sleep 600`",
    ]


def test_the_output_buffer_keeps_its_head_and_a_ring_of_its_tail_by_offset() -> None:
    buffer = OutputBuffer(head=4, tail=6)
    buffer.add(b"0123456789abcdef")  # head 0123, dropped 456789, tail abcdef

    assert buffer.since(0) == (b"0123", 6, b"abcdef")
    assert buffer.since(2) == (b"23", 6, b"abcdef")
    assert buffer.since(7) == (b"", 3, b"abcdef")
    assert buffer.since(12) == (b"", 0, b"cdef")
    assert buffer.since(16) == (b"", 0, b"")
    assert buffer.omitted == 6
    assert (HEAD_BYTES, TAIL_BYTES) == (8 * 1024, 64 * 1024)


# --- permissions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["ls", "git status", "rm -rf build", "cat ../outside.txt", "npm run dev", "echo $(id)"],
)
@pytest.mark.parametrize("mode", ["ask", "accept-edits", "bypass", "read-only"])
def test_a_background_command_is_decided_exactly_as_the_foreground_one(
    local_ctx: ToolContext, command: str, mode: PermissionMode
) -> None:
    memory = PermissionMemory(allowed={"cmd:ls", "tool:shell"})
    foreground = ShellParams(command=command)
    background = ShellParams(command=command, background=True)

    assert decide(SHELL, background, local_ctx, mode, memory) == decide(
        SHELL, foreground, local_ctx, mode, memory
    )
    assert memory.scopes_for(SHELL, background, local_ctx) == memory.scopes_for(
        SHELL, foreground, local_ctx
    )
    assert SHELL.title(background, local_ctx) == command


def test_reading_a_job_needs_no_permission_and_stopping_one_asks_in_ask_mode(
    local_ctx: ToolContext,
) -> None:
    memory = PermissionMemory()
    read_params, kill_params = JobOutputParams(job_id="job-1"), JobIdParams(job_id="job-1")

    assert decide(OUTPUT, read_params, local_ctx, "ask", memory) == "allow"
    assert decide(KILL, kill_params, local_ctx, "ask", memory) == "ask"
    assert memory.describe(KILL, kill_params, local_ctx) == "job_kill"


class _Provider:
    """Answers each model call with the next scripted list of events."""

    name = "scripted"

    def __init__(self, *replies: Sequence[StreamEvent]) -> None:
        self._replies = list(replies)
        self.requests: list[ModelRequest] = []

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        self.requests.append(copy.deepcopy(request))
        yield self._events(self._replies.pop(0))

    async def _events(self, reply: Sequence[StreamEvent]) -> AsyncIterator[StreamEvent]:
        for event in reply:
            await anyio.lowlevel.checkpoint()
            yield event


@dataclasses.dataclass
class _Choices:
    provider: _Provider
    mode: PermissionMode = "ask"

    async def model_setup(self) -> ModelSetup:
        return ModelSetup(self.provider, ModelSettings("m", "system", 100_000))  # type: ignore[arg-type]


class _Host:
    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.questions: list[PermissionQuestion] = []

    async def emit(self, event: TurnEvent) -> None:
        pass

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        self.questions.append(question)
        return self.decision

    def keep(self, message: Message, message_id: str | None) -> None:
        pass


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[StreamEvent]:
    events: list[StreamEvent] = [
        ToolCallEnd(ToolCallPart(f"call-{n}", name, arguments))
        for n, (name, arguments) in enumerate(calls, start=1)
    ]
    return [*events, Stop("tool_use")]


class _WaitForJobs(ToolParams):
    pass


class _WaitForJobsTool(Tool[_WaitForJobs]):
    """Test tool: returns once every job of the session has ended."""

    name = "wait_for_jobs"
    kind = "other"
    params_model = _WaitForJobs

    async def run(self, params: _WaitForJobs, ctx: ToolContext) -> ToolOutcome:
        for each in ctx.state.jobs:
            await each.wait_ended()
        return ToolOutcome("all ended")


def _turn(ctx: ToolContext, provider: _Provider, host: _Host, history: list[Message]) -> Turn:
    tools: dict[str, Tool[Any]] = {"shell": SHELL, "job_output": OUTPUT, "job_kill": KILL}
    tools["wait_for_jobs"] = _WaitForJobsTool()
    return Turn(
        choices=_Choices(provider),
        history=history,
        tools=tools,
        context=ctx,
        host=host,  # type: ignore[arg-type]
    )


async def test_a_refused_background_command_does_not_start(
    root: Path, local_ctx: ToolContext
) -> None:
    marker = root / "started"
    provider = _Provider(
        _calls(("shell", {"command": f"touch {marker}; sleep 600", "background": True})),
        [Stop("end_turn")],
    )
    host = _Host("reject_once")
    async with jobs_running(local_ctx) as ctx:
        await _turn(ctx, provider, host, []).run(Message("user", [TextPart("go")]))

    [question] = host.questions
    assert question.title == f"touch {marker}; sleep 600"
    assert len(ctx.state.jobs) == 0
    assert not marker.exists()


async def test_the_model_is_told_of_an_ended_job_at_its_next_request(
    local_ctx: ToolContext,
) -> None:
    provider = _Provider(
        _calls(("shell", {"command": "echo built", "background": True})),
        _calls(("wait_for_jobs", {})),  # the job ends during this tool round
        [Stop("end_turn")],
        [Stop("end_turn")],
    )
    history: list[Message] = []
    async with jobs_running(dataclasses.replace(local_ctx)) as ctx:
        await _turn(ctx, provider, _Host("allow_once"), history).run(
            Message("user", [TextPart("build")])
        )
        await _turn(ctx, provider, _Host("allow_once"), history).run(
            Message("user", [TextPart("next")])
        )

    note = "[job job-1 (`echo built`) ended: exit 0; job_output job-1 for its output]"
    after_round = provider.requests[2].messages[-1]
    assert after_round.role == "tool"
    last_result = after_round.parts[-1]
    assert isinstance(last_result, ToolResultPart)
    assert last_result.content[-1] == TextPart(note)
    next_prompt = provider.requests[3].messages[-1]
    assert next_prompt.role == "user" and TextPart(note) not in next_prompt.parts, "told once"


async def test_a_job_that_ends_between_turns_is_noted_in_the_next_prompt(
    local_ctx: ToolContext,
) -> None:
    provider = _Provider(
        _calls(("shell", {"command": "exit 1", "background": True})),
        [Stop("end_turn")],
        [Stop("end_turn")],
    )
    history: list[Message] = []
    async with jobs_running(local_ctx) as ctx:
        await _turn(ctx, provider, _Host("allow_once"), history).run(
            Message("user", [TextPart("start it")])
        )
        await job(ctx, "job-1").wait_ended()
        await _turn(ctx, provider, _Host("allow_once"), history).run(
            Message("user", [TextPart("and now?")])
        )

    prompt = provider.requests[2].messages[-1]
    assert prompt.parts == [
        TextPart("and now?"),
        TextPart("[job job-1 (`exit 1`) ended: exit 1]"),
    ]


# --- editor terminals ----------------------------------------------------------------------


async def test_in_an_editor_terminal_the_job_keeps_its_terminal_until_it_ends(
    root: Path, events: Events
) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(output="", runs_for=math.inf)])
    async with jobs_running(make_context(root, editor, events=events)) as ctx:
        outcome = await SHELL.run(ShellParams(command="npm run dev", background=True), ctx)
        terminal = editor.terminals["term-1"]
        assert (terminal.command, terminal.args) == ("bash", ["-c", "npm run dev"])
        assert outcome.display == (TerminalContent("term-1"),)
        assert outcome.raw_output is not None and outcome.raw_output["where"] == "terminal"

        terminal.script.output = "ready on :3000\n"
        first = await read(ctx, "job-1")
        terminal.script.output = "ready on :3000\nGET /\n"
        second = await read(ctx, "job-1")
        assert not terminal.released, "a running job keeps its terminal"

        stopped = await KILL.run(JobIdParams(job_id="job-1"), ctx)

    assert first.model_text.startswith("ready on :3000\n")
    assert second.model_text.startswith("GET /\n")
    assert "killed" in stopped.model_text
    assert terminal.released
    calls = editor.terminal_calls()
    assert calls[0] == "create" and calls[-1] == "release"
    assert "kill" in calls


async def test_an_editor_terminal_job_that_ends_is_released_with_its_exit_status(
    root: Path,
) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(output="done\n", exit_code=5)])
    async with jobs_running(make_context(root, editor)) as ctx:
        await SHELL.run(ShellParams(command="make", background=True), ctx)
        await job(ctx, "job-1").wait_ended()
        outcome = await read(ctx, "job-1", wait=0)

    assert outcome.model_text.startswith("done\n")
    assert "exit 5" in outcome.model_text
    assert editor.terminals["term-1"].released
    assert editor.terminal_calls() == ["create", "wait", "output", "release"]


async def test_an_editor_that_dropped_the_beginning_still_gives_only_new_output(
    root: Path,
) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(output="", runs_for=math.inf)])
    async with jobs_running(make_context(root, editor)) as ctx:
        await SHELL.run(ShellParams(command="tail -f log", background=True), ctx)
        terminal = editor.terminals["term-1"]
        terminal.script.output = "line 1\nline 2\nline 3\n"
        await read(ctx, "job-1")
        # The editor kept only the end, and more came.
        terminal.script.output, terminal.script.truncated = "line 3\nline 4\n", True
        later = await read(ctx, "job-1")

    assert later.model_text.startswith("line 4\n")
    assert "line 3" not in later.model_text


async def test_without_a_task_group_for_jobs_the_command_is_refused_not_started(
    root: Path, local_ctx: ToolContext
) -> None:
    with pytest.raises(ToolFailed, match="not available"):
        await SHELL.run(ShellParams(command=f"touch {root / 'x'}", background=True), local_ctx)

    assert not (root / "x").exists()
