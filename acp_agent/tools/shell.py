"""shell: run a command in an editor terminal, or as a local subprocess when the client has no
terminals.

The command line goes to `bash -c`, not to the editor as a program name, so pipes,
redirections, `&&` and globs work the same everywhere. It is a non-login shell: profile
scripts would add output and slowness to every call.

Live output:
- in an editor terminal the editor shows the terminal itself (the tool call carries
  `TerminalContent`); we do not poll `terminal/output` while it runs, which would only cost
  requests, and we send no `TerminalStream`: Zed would open a second, display-only terminal
  under the same id in place of the real one;
- a local subprocess has no terminal on the client, so its output goes out as
  `TerminalStream` updates: a first one with the cwd, then new output as it comes (no
  polling, it is pushed), then the exit. Zed renders them through its `_meta.terminal_*`
  extension (`ToolContext.client_shows_terminal_stream`); other clients get the output as
  text in the finished tool call.

Whatever happens (exit, timeout, error, cancellation) an editor terminal is released, and a
cancelled or timed-out command is killed first. A non-zero exit is a normal result for the
model; the user sees the call end `failed`, with the exit code.

With `background: true` the command starts where it would otherwise run, after the same
permission decision, and the call returns its job id at once; `jobs.py` watches it from
then on (its editor terminal is released only when it ends).
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup
from pydantic import Field

from ..messages import (
    Location,
    TerminalContent,
    TerminalStream,
    TextPart,
    ToolCallUpdated,
    ToolContent,
)
from ._text import cut_middle, fenced
from .base import (
    Editor,
    TerminalExit,
    Tool,
    ToolContext,
    ToolFailed,
    ToolOutcome,
    ToolParams,
)
from .jobs import (
    clean_up_quietly,
    job_group,
    start_local_job,
    start_terminal_job,
    started_outcome,
)
from .local import run_local_command

MAX_TIMEOUT_SECONDS = 1800.0
OUTPUT_BYTE_LIMIT = 64 * 1024
"""Output an editor terminal keeps (the client drops the beginning past this)."""
LOCAL_HEAD_BYTES = 16 * 1024
LOCAL_TAIL_BYTES = 48 * 1024
"""What we keep of a local command's output: its beginning and its (more telling) end."""
LIVE_OUTPUT_LIMIT = 1024 * 1024
"""Output of a local command streamed to the client before live updates stop."""
MODEL_HEAD_CHARS = 10_000
MODEL_TAIL_CHARS = 20_000
"""The model reads at most the first and last this many characters of the output."""
CLEANUP_SECONDS = 2.0
"""Time allowed for killing and releasing an editor terminal once we stop waiting for it."""
CREATE_SECONDS = 10.0
"""Time allowed for the editor to start a terminal (shielded from cancellation)."""

# Pagers would wait for a key press that never comes (editor terminals are PTYs).
COMMAND_ENV = {"PAGER": "cat", "GIT_PAGER": "cat"}


class ShellParams(ToolParams):
    command: str = Field(
        min_length=1,
        description="The command line, run by `bash -c` (pipes, redirections and && work). "
        "It gets no input: do not start interactive programs.",
    )
    timeout_seconds: float | None = Field(
        None,
        gt=0,
        le=MAX_TIMEOUT_SECONDS,
        description="Stop the command after this many seconds (the default suits tests and "
        "builds; raise it for slow ones).",
    )
    cwd: str | None = Field(
        None,
        description="Directory to run in, inside the workspace: absolute, or relative to the "
        "working directory (the default).",
    )
    background: bool = Field(
        False,
        description="Start the command as a background job and return its job_id at once "
        "(servers, watchers, long builds); it keeps running after this turn, with no time "
        "limit unless timeout_seconds is given. Read it with job_output, stop it with job_kill.",
    )


@dataclass(frozen=True, slots=True)
class _Finished:
    """A command's end, from either kind of terminal, in the form the model reads."""

    output: str
    exit: TerminalExit | None
    timed_out: bool
    cut_notice: str | None
    """Why the beginning or middle of the output is missing, if it is."""
    terminal_id: str
    stopped_by_user: bool = False
    """The user stopped the command (its terminal), not the turn."""


class Shell(Tool[ShellParams]):
    """Run a shell command in the workspace and return its output (stdout and stderr together) and
    exit status. Use it for builds, tests, git and other programs; prefer read_file, search and
    edit_file for reading, finding and changing files. Each call starts a fresh shell: `cd` and
    variables do not carry over. With background, the command runs on as a job."""

    name = "shell"
    kind = "execute"
    read_only = False
    params_model = ShellParams

    def title(self, params: ShellParams, ctx: ToolContext) -> str:
        # The permission request shows the title: it must be the exact command.
        return params.command

    def locations(self, params: ShellParams, ctx: ToolContext) -> tuple[Location, ...]:
        return ()

    def command(self, params: ShellParams) -> str | None:
        return params.command

    async def preview(self, params: ShellParams, ctx: ToolContext) -> tuple[ToolContent, ...]:
        where = "" if params.cwd is None else f"in {ctx.resolve(params.cwd)}\n"
        if params.background:
            where = "in the background (until it ends or is stopped), " + where
        return (TextPart(where + fenced(params.command, "sh")),)

    async def run(self, params: ShellParams, ctx: ToolContext) -> ToolOutcome:
        cwd = _working_directory(params, ctx)
        if params.background:
            return await _start_job(params, cwd, ctx)
        timeout = params.timeout_seconds or ctx.shell_timeout
        if ctx.editor.can_run_terminals:
            finished = await _run_in_editor(params.command, cwd, timeout, ctx)
        else:
            finished = await _run_locally(params.command, cwd, timeout, ctx)
        status = finished.exit or TerminalExit(None, None)
        return ToolOutcome(
            model_text=model_text(finished, timeout),
            display=_display(finished, timeout, ctx),
            raw_output={
                "exit_code": status.exit_code,
                "signal": status.signal,
                "timed_out": finished.timed_out,
                "output_truncated": finished.cut_notice is not None,
            },
            failed=_failed(finished),
        )


def _failed(finished: _Finished) -> bool:
    """A non-zero exit, a signal or a timeout; an unknown status is not a failure."""
    status = finished.exit
    if finished.timed_out:
        return True
    if status is None:
        return False
    return bool(status.signal) or status.exit_code not in (None, 0)


def _display(finished: _Finished, timeout: float, ctx: ToolContext) -> tuple[ToolContent, ...]:
    """The terminal when the client shows one for this command, else the output as text;
    then, when it failed, how it ended (the exit code)."""
    in_editor = ctx.editor.can_run_terminals
    shown: ToolContent
    if in_editor or ctx.client_shows_terminal_stream:
        shown = TerminalContent(finished.terminal_id)
    else:
        shown = TextPart(fenced(finished.output or "(no output)"))
    if _failed(finished):
        return (shown, TextPart(_ending(finished, timeout)))
    return (shown,)


def _ending(finished: _Finished, timeout: float) -> str:
    """How a failed command ended, for the user."""
    status = finished.exit
    if finished.stopped_by_user:
        return "Stopped by the user."
    if finished.timed_out:
        return f"Timed out after {timeout:g} s: the command was stopped."
    if status is not None and status.signal:
        return f"Ended by signal {status.signal}."
    code = None if status is None else status.exit_code
    return f"Exited with code {code}."


def _working_directory(params: ShellParams, ctx: ToolContext) -> Path:
    if params.cwd is None:
        return ctx.cwd
    cwd = ctx.resolve(params.cwd)
    if not ctx.inside_roots(cwd):
        raise ToolFailed(f"cwd {cwd} is outside the workspace; commands run inside it only.")
    if not cwd.is_dir():
        raise ToolFailed(f"cwd {cwd} is not a directory.")
    return cwd


async def _start_job(params: ShellParams, cwd: Path, ctx: ToolContext) -> ToolOutcome:
    """Start the command as a background job (`jobs.py`), where a foreground one would run."""
    background = job_group(ctx)
    limit = params.timeout_seconds
    if ctx.editor.can_run_terminals:
        terminal_id = await _create_terminal(ctx.editor, params.command, cwd, background)
        job = start_terminal_job(ctx, params.command, terminal_id, cwd, limit)
        return started_outcome(job, TerminalContent(terminal_id))
    argv = ["bash", "-c", params.command]
    job = await start_local_job(ctx, params.command, argv, cwd, COMMAND_ENV, limit)
    return started_outcome(job, None)


# --- editor terminal -----------------------------------------------------------------------


async def _run_in_editor(command: str, cwd: Path, time_limit: float, ctx: ToolContext) -> _Finished:
    editor = ctx.editor
    terminal_id = await _create_terminal(editor, command, cwd, ctx.background)
    try:
        # A cancel that arrived while the terminal was being created lands here, where the
        # terminal is killed and released rather than left running in the editor.
        await anyio.lowlevel.checkpoint()
        await ctx.emit(
            ToolCallUpdated(
                ctx.tool_call_id, status="in_progress", content=(TerminalContent(terminal_id),)
            )
        )
        exit_status: TerminalExit | None = None
        with anyio.move_on_after(time_limit) as deadline:
            exit_status = await editor.wait_for_terminal_exit(terminal_id)
        if deadline.cancelled_caught:
            exit_status = await _kill_after_timeout(ctx, terminal_id)
        result = await editor.terminal_output(terminal_id)
    except anyio.get_cancelled_exc_class():
        with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
            await clean_up_quietly("kill", editor.kill_terminal(terminal_id))
        raise
    finally:
        # Release frees the client's terminal (and kills it if it still runs), whatever
        # ended the wait.
        with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
            await clean_up_quietly("release", editor.release_terminal(terminal_id))
    notice = None
    if result.truncated:
        notice = f"the editor kept only the last {OUTPUT_BYTE_LIMIT // 1024} KiB of the output"
    return _Finished(
        output=result.output,
        exit=result.exit or exit_status,
        timed_out=deadline.cancelled_caught,
        cut_notice=notice,
        terminal_id=terminal_id,
    )


async def _create_terminal(
    editor: Editor, command: str, cwd: Path, background: TaskGroup | None
) -> str:
    """Start the command in an editor terminal.

    A cancel must neither wait for a slow editor nor leave a terminal we hold no id for: the
    request runs in the connection's `background` group, and a terminal that arrives after
    we stopped waiting is killed and released there. Without that group the request is
    shielded instead (bounded by CREATE_SECONDS).
    """
    creation = _TerminalCreation(editor, command, cwd)
    if background is not None:
        background.start_soon(creation.run)
        return await creation.wait_for_id(run_here=False)
    with anyio.CancelScope(shield=True):
        terminal_id = await creation.wait_for_id(run_here=True)
    return terminal_id


class _TerminalCreation:
    """A `terminal/create` whose answer may come after we stopped waiting for it.

    Two facts decide who cleans up: "the id arrived" and "nobody waits for it any more".
    Whichever side learns the second one kills and releases the terminal, so it is never
    left running in the editor, in whatever order the answer and a cancel come.
    """

    def __init__(self, editor: Editor, command: str, cwd: Path) -> None:
        self._editor = editor
        self._command = command
        self._cwd = cwd
        self._done = anyio.Event()
        self._terminal_id: str | None = None
        self._failure: Exception | None = None
        self._abandoned = False

    async def run(self) -> None:
        try:
            terminal_id = await self._editor.create_terminal(
                "bash", ["-c", self._command], str(self._cwd), COMMAND_ENV, OUTPUT_BYTE_LIMIT
            )
        except Exception as exc:
            self._failure = exc
        else:
            self._terminal_id = terminal_id
            if self._abandoned:
                await self._dispose(terminal_id)
        finally:
            self._done.set()

    async def wait_for_id(self, *, run_here: bool) -> str:
        try:
            with anyio.move_on_after(CREATE_SECONDS):
                if run_here:
                    await self.run()
                await self._done.wait()
        except BaseException:
            await self._abandon()  # cancelled, maybe just as the answer arrived
            raise
        if self._failure is not None:
            raise self._failure
        if self._terminal_id is None:
            await self._abandon()
            raise ToolFailed(f"the editor did not start a terminal within {CREATE_SECONDS:g} s")
        return self._terminal_id

    async def _abandon(self) -> None:
        self._abandoned = True
        if self._terminal_id is not None:
            with anyio.CancelScope(shield=True):
                await self._dispose(self._terminal_id)

    async def _dispose(self, terminal_id: str) -> None:
        with anyio.move_on_after(CLEANUP_SECONDS):
            await clean_up_quietly("kill", self._editor.kill_terminal(terminal_id))
            await clean_up_quietly("release", self._editor.release_terminal(terminal_id))


async def _kill_after_timeout(ctx: ToolContext, terminal_id: str) -> TerminalExit | None:
    """Kill the timed-out command and wait briefly for its exit status."""
    await clean_up_quietly("kill", ctx.editor.kill_terminal(terminal_id))
    with anyio.move_on_after(CLEANUP_SECONDS), contextlib.suppress(ToolFailed):
        return await ctx.editor.wait_for_terminal_exit(terminal_id)
    return None


# --- local subprocess ----------------------------------------------------------------------


async def _run_locally(command: str, cwd: Path, time_limit: float, ctx: ToolContext) -> _Finished:
    terminal_id = f"local-{ctx.tool_call_id or uuid.uuid4().hex}"

    async def forward(text: str) -> None:
        await ctx.emit(
            ToolCallUpdated(ctx.tool_call_id, terminal=TerminalStream(terminal_id, output=text))
        )

    # The user may stop the command alone (its terminal), and the turn goes on.
    stop = anyio.Event()

    async def stop_command() -> None:
        stop.set()

    # The first report opens the client's display terminal (when it has them); the title
    # rides along because Zed opens it from a whole `tool_call`, which needs one.
    shown = (TerminalContent(terminal_id),) if ctx.client_shows_terminal_stream else None
    opened = TerminalStream(terminal_id, cwd=str(cwd), command=command, stoppable=True)
    with ctx.state.work.terminal(terminal_id, stop_command):
        await ctx.emit(
            ToolCallUpdated(
                ctx.tool_call_id,
                status="in_progress",
                title=command,
                content=shown,
                terminal=opened,
            )
        )
        try:
            result = await run_local_command(
                ["bash", "-c", command],
                cwd=cwd,
                env=COMMAND_ENV,
                base_env=ctx.child_env,
                time_limit=time_limit,
                on_output=forward,
                head_bytes=LOCAL_HEAD_BYTES,
                tail_bytes=LOCAL_TAIL_BYTES,
                stream_limit=LIVE_OUTPUT_LIMIT,
                stop=stop,
            )
        except anyio.get_cancelled_exc_class():
            # The command was ended with its call or turn: its terminal must not look alive.
            with anyio.move_on_after(CLEANUP_SECONDS, shield=True):
                ended = TerminalStream(terminal_id, exited=True)
                await ctx.emit(ToolCallUpdated(ctx.tool_call_id, terminal=ended))
            raise
    await ctx.emit(
        ToolCallUpdated(
            ctx.tool_call_id,
            terminal=TerminalStream(
                terminal_id, exited=True, exit_code=result.exit_code, signal=result.signal
            ),
        )
    )
    notice = None
    if result.omitted_bytes:
        notice = f"{result.omitted_bytes} bytes from the middle of the output were left out"
    return _Finished(
        output=result.output,
        exit=TerminalExit(result.exit_code, result.signal),
        timed_out=result.timed_out,
        cut_notice=notice,
        terminal_id=terminal_id,
        stopped_by_user=stop.is_set(),
    )


# --- what the model reads ------------------------------------------------------------------


def model_text(finished: _Finished, timeout: float) -> str:
    """Output (head and tail when long), then the exit status and any cut notices."""
    output = finished.output.replace("\r\n", "\n")
    output, omitted = cut_middle(output, MODEL_HEAD_CHARS, MODEL_TAIL_CHARS)
    notes = [_status(finished, timeout)]
    if finished.cut_notice:
        notes.append(f"[output truncated: {finished.cut_notice}]")
    if omitted:
        notes.append(
            f"[output truncated: {omitted} characters from the middle were left out; "
            "redirect the output to a file and search it for details]"
        )
    body = output.rstrip("\n") if output.strip() else "(no output)"
    return body + "\n\n" + "\n".join(notes)


def _status(finished: _Finished, timeout: float) -> str:
    if finished.stopped_by_user:
        how = _status(replace(finished, stopped_by_user=False), timeout)
        return "[the user stopped this command: " + how[1:]
    if finished.timed_out:
        return f"[timed out after {timeout:g} s: the command was stopped]"
    status = finished.exit
    if status is None or (status.exit_code is None and status.signal is None):
        return "[exit status unknown]"
    if status.signal:
        return f"[ended by signal {status.signal}]"
    return f"[exit code {status.exit_code}]"


__all__ = ["Shell", "ShellParams", "model_text"]
