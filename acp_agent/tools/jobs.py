"""Background jobs: `shell` with `background: true` starts one; `job_output` reads what it
printed since the last read, `job_kill` stops it.

A job outlives the turn that started it, so its watcher runs in the connection's task
group (`ToolContext.background`), never the turn's: a cancelled or finished turn leaves it
running. It runs where a foreground command would, after the same permission decision
(`shell` decides; this module only runs what was allowed):

- in an editor terminal when the client has terminals: the terminal is kept (not released)
  until the command ends, then released. ACP pushes no output, so `job_output` asks for
  `terminal/output` when it is called, and every `TERMINAL_POLL_SECONDS` while it waits;
- locally otherwise, in its own process group with the child environment of `shell`; its
  output is pushed into the job's buffer as it comes.

Whatever ends a job's watcher (the command's exit, `job_kill`, the session's end, the
connection's end cancelling the task group) ends the command's whole process group, or
kills and releases its terminal: no job outlives its session.
"""

from __future__ import annotations

import codecs
import logging
import math
import signal
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.abc
from pydantic import Field

from ..messages import BackgroundChanged, TerminalStream, TextPart, ToolCallUpdated, ToolContent
from ._job_table import Job, JobEnd, JobRead, JobTable, Where, short_command
from ._text import cut_middle, fenced
from .base import Editor, Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams
from .local import open_command, supervise, terminate_group

log = logging.getLogger(__name__)

MAX_WAIT_SECONDS = 60.0
TERMINAL_POLL_SECONDS = 0.5
"""How often a waiting `job_output` asks an editor terminal for its output."""
CLEANUP_SECONDS = 2.0
"""Time allowed for each editor call that ends a job (kill, last output, release)."""
READ_HEAD_CHARS = 8_000
READ_TAIL_CHARS = 16_000
"""The model reads at most the first and last this many characters of one read."""
READ_CHUNK_BYTES = 65536
LIVE_OUTPUT_LIMIT = 1024 * 1024
"""Output of a local job shown live in its display terminal (as for a foreground command)."""


class JobOutputParams(ToolParams):
    job_id: str = Field(
        min_length=1, description="The job's id, as `shell` with `background` returned it."
    )
    wait_seconds: float = Field(
        0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Wait up to this many seconds for new output or the job's end, whichever "
        "comes first; 0 answers at once.",
    )


class JobIdParams(ToolParams):
    job_id: str = Field(min_length=1, description="The job's id (job-1, job-2 ...).")


class JobOutput(Tool[JobOutputParams]):
    """Read a background job's output since the last read (its beginning and end when long)
    and, once it has ended, its exit status. Pass wait_seconds to wait for output or the
    end instead of calling again at once."""

    name = "job_output"
    kind = "read"
    read_only = True
    params_model = JobOutputParams

    def title(self, params: JobOutputParams, ctx: ToolContext) -> str:
        return f"Output of {_label(ctx.state.jobs, params.job_id)}"

    async def run(self, params: JobOutputParams, ctx: ToolContext) -> ToolOutcome:
        job = find_job(ctx.state.jobs, params.job_id)
        if job.refresh is not None and job.running:
            await job.refresh()
        await _wait_for_news(job, params.wait_seconds)
        return _read_outcome(job, job.read())


class JobKill(Tool[JobIdParams]):
    """Stop a background job: its whole process group is ended. Returns what it printed
    since the last read and how it ended."""

    name = "job_kill"
    kind = "execute"
    read_only = False
    params_model = JobIdParams

    def title(self, params: JobIdParams, ctx: ToolContext) -> str:
        # The permission request shows the title: it names the command that will stop.
        return f"Stop {_label(ctx.state.jobs, params.job_id)}"

    async def run(self, params: JobIdParams, ctx: ToolContext) -> ToolOutcome:
        job = find_job(ctx.state.jobs, params.job_id)
        had_ended = not job.running
        await job.kill()
        read = job.read()
        outcome = _read_outcome(job, read)
        if had_ended:
            note = f"[{job.id} had already ended before job_kill]"
            return _with_note(outcome, note)
        return outcome


def find_job(jobs: JobTable, job_id: str) -> Job:
    job = jobs.get(job_id)
    if job is not None:
        return job
    known = ", ".join(f"{j.id} ({'running' if j.end is None else j.end.describe()})" for j in jobs)
    if not known:
        raise ToolFailed(f"There is no job {job_id!r}: no background job was started yet.")
    raise ToolFailed(f"There is no job {job_id!r}. Jobs: {known}.")


def _label(jobs: JobTable, job_id: str) -> str:
    job = jobs.get(job_id)
    return job_id if job is None else f"{job.id}: {short_command(job)}"


async def _wait_for_news(job: Job, seconds: float) -> None:
    """Until the job has output the model has not read or has ended, at most `seconds`."""
    with anyio.move_on_after(seconds):
        while not job.has_news:
            if job.refresh is None:
                await job.next_change()
                continue
            # An editor terminal tells nothing of itself: ask it now and then (its end
            # wakes us at once: the watcher's wait returns).
            with anyio.move_on_after(TERMINAL_POLL_SECONDS):
                await job.next_change()
            if job.running:
                await job.refresh()


# --- what the model reads ------------------------------------------------------------------


def _read_outcome(job: Job, read: JobRead) -> ToolOutcome:
    output = read.text.replace("\r\n", "\n")
    output, omitted = cut_middle(output, READ_HEAD_CHARS, READ_TAIL_CHARS)
    notes = [_status(job, read)]
    if read.dropped_bytes:
        notes.append(
            f"[{read.dropped_bytes} bytes from the middle were not kept: a job keeps the "
            "first 8 KiB of its output and the last 64 KiB; read more often, or redirect "
            "the output to a file]"
        )
    if omitted:
        notes.append(f"[{omitted} characters from the middle of this read were left out]")
    body = output.rstrip("\n") if output.strip() else "(no new output)"
    end = read.end
    return ToolOutcome(
        model_text=body + "\n\n" + "\n".join(notes),
        display=(TextPart(fenced(output or "(no new output)")), TextPart(notes[0])),
        raw_output={
            "job_id": job.id,
            "running": job.running,
            "exit_code": None if end is None else end.exit_code,
            "signal": None if end is None else end.signal,
            "killed": end is not None and end.killed,
            "new_bytes": read.new_bytes,
            "dropped_bytes": read.dropped_bytes,
        },
    )


def _status(job: Job, read: JobRead) -> str:
    seconds = f"{job.age():.0f} s"
    if read.end is not None:
        return f"[{job.id} {read.end.describe()} after {seconds}]"
    if job.end is not None:
        return f"[{job.id} has ended; more output is left: read again]"
    return f"[{job.id} still running after {seconds}; {job.output.total} bytes of output so far]"


def _with_note(outcome: ToolOutcome, note: str) -> ToolOutcome:
    return ToolOutcome(
        model_text=f"{outcome.model_text}\n{note}",
        display=outcome.display,
        raw_output=outcome.raw_output,
    )


def started_outcome(job: Job, shown: ToolContent | None) -> ToolOutcome:
    """What `shell` with `background` returns at once."""
    where = "an editor terminal" if job.where == "terminal" else "the background"
    text = (
        f"Started {job.id} in {where}: `{short_command(job)}`. It keeps running after this "
        f"turn. Read its output with job_output (job_id {job.id!r}, wait_seconds to wait); "
        "stop it with job_kill."
    )
    return ToolOutcome(
        model_text=text,
        display=(shown,) if shown is not None else (TextPart(text),),
        raw_output={"job_id": job.id, "background": True, "where": job.where},
    )


# --- starting ------------------------------------------------------------------------------


def job_group(ctx: ToolContext) -> anyio.abc.TaskGroup:
    """The task group a new job's watcher runs in; `ToolFailed` when no job may start."""
    if ctx.background is None:
        raise ToolFailed("Background jobs are not available here: run the command without it.")
    if ctx.state.jobs.closed:
        raise ToolFailed("The session is ending: no new job starts.")
    return ctx.background


def _new_job(ctx: ToolContext, command: str, cwd: Path, where: Where) -> Job:
    job = Job(ctx.state.jobs.next_id(), command, str(cwd), where)
    ctx.state.jobs.add(job)
    return job


async def start_local_job(
    ctx: ToolContext,
    command: str,
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float | None,
) -> Job:
    """Start `argv` as a local background job of the session; `ToolFailed` if it cannot."""
    background = job_group(ctx)
    process = await open_command(argv, cwd=cwd, env=env, base_env=ctx.child_env)
    # No checkpoint between the start and the watcher: a cancel cannot orphan the group.
    job = _new_job(ctx, command, cwd, "local")
    job.stop = lambda: _end_group(process)
    display = _JobDisplay(ctx, job) if ctx.client_shows_terminal_stream else None
    if display is not None:
        # Shown opened before its output or its end (shielded: the group must get its
        # watcher whatever happens).
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_SECONDS):
            await display.opened()
    background.start_soon(_guarded, job, _watch_local(job, process, time_limit, display))
    return job


class _JobDisplay:
    """A local job's display terminal, for clients that show a command's live output: it
    opens as the job starts, shows its output as it comes, then its exit; until then the job
    is background work the user may stop from there (`SessionWork`). Reported with
    `ctx.report`, not the turn's `emit`: the job outlives the turn."""

    def __init__(self, ctx: ToolContext, job: Job) -> None:
        self._ctx, self._job = ctx, job
        self._call_id = ctx.tool_call_id
        self._terminal_id = job.display_terminal = f"local-{job.id}"
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._shown = 0

    async def opened(self) -> None:
        job = self._job
        self._ctx.state.work.add_terminal(self._terminal_id, self._stop_by_user)
        opening = TerminalStream(
            self._terminal_id, cwd=job.cwd, command=job.command, stoppable=True
        )
        # The title rides along: Zed opens a display terminal from a whole `tool_call`.
        await self._quietly(ToolCallUpdated(self._call_id, title=job.command, terminal=opening))
        await self._report_background()

    async def output(self, data: bytes) -> None:
        if self._shown >= LIVE_OUTPUT_LIMIT:
            return  # the model still reads all of it through job_output
        self._shown += len(data)
        text = self._decoder.decode(data)
        if text:
            await self._report(TerminalStream(self._terminal_id, output=text))

    async def exited(self, end: JobEnd) -> None:
        self._ctx.state.work.forget_terminal(self._terminal_id)
        exit = TerminalStream(
            self._terminal_id, exited=True, exit_code=end.exit_code, signal=end.signal
        )
        await self._report(exit)
        await self._report_background()

    async def _stop_by_user(self) -> None:
        self._job.stopped_by_user = True
        await self._job.kill()

    async def _report(self, stream: TerminalStream) -> None:
        await self._quietly(ToolCallUpdated(self._call_id, terminal=stream))

    async def _report_background(self) -> None:
        await self._quietly(BackgroundChanged(self._ctx.state.jobs.shown_running()))

    async def _quietly(self, event: ToolCallUpdated | BackgroundChanged) -> None:
        # What the editor is shown must not end the job: a closed connection only hides it.
        try:
            await self._ctx.report(event)
        except Exception as exc:
            log.debug("display of %s: %s", self._job.id, exc)


async def _guarded(job: Job, watch: Awaitable[None]) -> None:
    """Run a job's watcher in the connection's task group, which a failure of one job must
    not bring down (the watchers end their command whatever fails)."""
    try:
        await watch
    except Exception:
        log.exception("background %s (%s) failed", job.id, short_command(job))
        job.finish(JobEnd(None, None))


async def _end_group(process: anyio.abc.Process) -> None:
    """`job_kill`: end the group while its leader runs (once the leader has exited, its
    watcher ends the rest, and the pid may soon be another process's)."""
    if process.returncode is None:
        await terminate_group(process)


async def _watch_local(
    job: Job, process: anyio.abc.Process, time_limit: float | None, display: _JobDisplay | None
) -> None:
    """Copy the output into the job until the command ends, then end what it left behind."""

    async def pump(drained: anyio.Event) -> None:
        await _pump(process, job, drained, display)

    timed_out = False
    try:
        timed_out = await supervise(process, pump, math.inf if time_limit is None else time_limit)
    finally:
        end = _local_end(process.returncode, job.stop_requested, timed_out)
        job.finish(replace(end, by_user=job.stopped_by_user))
        if display is not None:
            with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                await display.exited(end)


async def _pump(
    process: anyio.abc.Process, job: Job, drained: anyio.Event, display: _JobDisplay | None
) -> None:
    assert process.stdout is not None
    try:
        async for chunk in process.stdout:
            job.add_output(chunk)
            if display is not None:
                await display.output(chunk)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        drained.set()


def _local_end(code: int | None, killed: bool, timed_out: bool) -> JobEnd:
    if code is None or code >= 0:
        return JobEnd(code, None, killed=killed, timed_out=timed_out)
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = str(-code)
    return JobEnd(None, name, killed=killed, timed_out=timed_out)


def start_terminal_job(
    ctx: ToolContext, command: str, terminal_id: str, cwd: Path, time_limit: float | None
) -> Job:
    """A job of the command running in editor terminal `terminal_id`, watched until it ends
    (then released)."""
    background = job_group(ctx)
    job = _new_job(ctx, command, cwd, "terminal")
    job.terminal_id = terminal_id
    feed = _TerminalFeed(ctx.editor, terminal_id, job)
    job.stop, job.refresh = feed.kill, feed.refresh
    background.start_soon(_guarded, job, feed.watch(time_limit))
    return job


class _TerminalFeed:
    """Brings an editor terminal's output into its job: `terminal/output` returns all the
    terminal kept, so only what follows the text seen last is new."""

    def __init__(self, editor: Editor, terminal_id: str, job: Job) -> None:
        self._editor = editor
        self._terminal_id = terminal_id
        self._job = job
        self._seen = ""
        self._lock = anyio.Lock()
        self._released = False
        self._last_exit: JobEnd | None = None

    async def watch(self, time_limit: float | None) -> None:
        job, editor, tid = self._job, self._editor, self._terminal_id
        timed_out = False
        try:
            with anyio.move_on_after(math.inf if time_limit is None else time_limit) as limit:
                await editor.wait_for_terminal_exit(tid)
            if limit.cancelled_caught:
                timed_out = True
                await self.kill()
        except ToolFailed as exc:
            log.warning("terminal %s of %s: %s", tid, job.id, exc)
        except BaseException:
            with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                await clean_up_quietly("kill", editor.kill_terminal(tid))
            raise
        finally:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(CLEANUP_SECONDS):
                    await self.refresh()  # the last words, and the exit status
                with anyio.move_on_after(CLEANUP_SECONDS):
                    async with self._lock:
                        self._released = True
                        await clean_up_quietly("release", editor.release_terminal(tid))
            end = self._last_exit or JobEnd(None, None)
            job.finish(
                JobEnd(end.exit_code, end.signal, killed=job.stop_requested, timed_out=timed_out)
            )

    async def kill(self) -> None:
        async with self._lock:
            if not self._released:
                with anyio.move_on_after(CLEANUP_SECONDS):
                    await clean_up_quietly("kill", self._editor.kill_terminal(self._terminal_id))

    async def refresh(self) -> None:
        async with self._lock:
            if self._released:
                return
            try:
                result = await self._editor.terminal_output(self._terminal_id)
            except ToolFailed as exc:
                log.debug("terminal output of %s: %s", self._job.id, exc)
                return
            self._job.add_output(self._new_text(result.output).encode("utf-8"))
            if result.exit is not None:
                self._last_exit = JobEnd(result.exit.exit_code, result.exit.signal)

    def _new_text(self, output: str) -> str:
        """What `output` holds past the text seen last. Past its byte limit the editor drops
        the beginning: then the longest end of the text seen last that `output` begins with
        was seen already (a repeat the editor kept may be taken for it: a line repeated
        exactly is lost rather than the read misaligned)."""
        seen, self._seen = self._seen, output
        if output.startswith(seen):
            return output[len(seen) :]
        return output[_overlap(seen, output) :]


def _overlap(before: str, after: str) -> int:
    """The length of the longest end of `before` that `after` begins with (Knuth-Morris-
    Pratt: `after`'s prefix function, then `before`'s end run through it)."""
    size = min(len(before), len(after))
    pattern, text = after[:size], before[len(before) - size :]
    if not size:
        return 0
    failure = [0] * size
    matched = 0
    for index in range(1, size):
        while matched and pattern[index] != pattern[matched]:
            matched = failure[matched - 1]
        if pattern[index] == pattern[matched]:
            matched += 1
        failure[index] = matched
    matched = 0
    for char in text:
        while matched and (matched == size or char != pattern[matched]):
            matched = failure[matched - 1]
        if char == pattern[matched]:
            matched += 1
    return matched


async def clean_up_quietly(what: str, call: Awaitable[None]) -> None:
    """Await a terminal cleanup call (kill, release); its failure must not hide why we are
    cleaning up."""
    try:
        await call
    except Exception as exc:
        log.warning("terminal %s failed: %s", what, exc)


__all__ = [
    "JobIdParams",
    "JobKill",
    "JobOutput",
    "JobOutputParams",
    "clean_up_quietly",
    "find_job",
    "job_group",
    "start_local_job",
    "start_terminal_job",
    "started_outcome",
]
