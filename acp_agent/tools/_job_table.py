"""The background jobs of one session: what each one printed, where it stands, how it ended.

A job outlives the turn that started it, so its state lives in the session's tool state
(`SessionToolState.jobs`), and its process is watched by a task in the connection's task
group (`jobs.py` starts both). This module knows no processes and no editor: a job's
runner hands it `stop` (end the process group, or kill the editor terminal) and, for an
editor terminal, `refresh` (fetch what the terminal printed since, as ACP pushes nothing).

Output is kept by absolute byte offset: the first `HEAD_BYTES` and a ring of the last
`TAIL_BYTES`; what falls between is counted, not kept. Each read returns what came after the
job's read cursor and moves it, so the model sees every byte at most once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

import anyio

from ..durations import SPELT_OUT, format_duration
from ._output import OutputCapture

HEAD_BYTES = 8 * 1024
TAIL_BYTES = 64 * 1024
STOP_SECONDS = 5.0
"""Time a stopped job has to end (SIGTERM, a grace, SIGKILL) before we stop waiting."""
CLOSE_SECONDS = 8.0
"""Time closing a session's jobs may take, all of them together."""
NOTE_COMMAND_CHARS = 80

Where: TypeAlias = Literal["local", "terminal"]


class OutputBuffer(OutputCapture):
    """A job's output: the first `head` bytes and the last `tail` bytes, by absolute offset."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        super().__init__(head, tail)

    def last(self, count: int) -> bytes:
        """The last `count` bytes written (fewer when fewer are kept)."""
        kept = self._head + self._tail if len(self._tail) < count else self._tail
        return bytes(kept[-count:])

    def since(self, offset: int) -> tuple[bytes, int, bytes]:
        """What is kept of the bytes from `offset` on: (from the head, bytes dropped
        between, from the tail)."""
        tail_start = self.total - len(self._tail)  # never before the end of the head
        head = bytes(self._head[offset:]) if offset < len(self._head) else b""
        gap = max(0, tail_start - max(offset, len(self._head)))
        tail = bytes(self._tail[max(0, offset - tail_start) :])
        return head, gap, tail


@dataclass(frozen=True, slots=True)
class JobEnd:
    exit_code: int | None
    signal: str | None
    killed: bool = False
    """Stopped by `job_kill` or because the session ended."""
    timed_out: bool = False
    by_user: bool = False
    """Stopped by the user from the editor (its terminal), not by the model."""

    def describe(self) -> str:
        """How the job ended, in a few words (the model and the user read it)."""
        if self.by_user:
            return f"stopped by the user ({self.signal})" if self.signal else "stopped by the user"
        if self.timed_out:
            return "timed out (stopped)"
        if self.killed:
            return f"killed ({self.signal})" if self.signal else "killed"
        if self.signal:
            return f"ended by signal {self.signal}"
        if self.exit_code is None:
            return "ended (exit status unknown)"
        return f"exit {self.exit_code}"


@dataclass(frozen=True, slots=True)
class JobRead:
    """One read of a job's new output."""

    text: str
    new_bytes: int
    dropped_bytes: int
    """New bytes no longer kept (between the buffer's head and tail)."""
    end: JobEnd | None
    """Set once the job has ended and this read reached the end of its output."""


Stop = Callable[[], Awaitable[None]]


@dataclass(eq=False)
class Job:
    id: str
    command: str
    cwd: str
    where: Where
    terminal_id: str | None = None
    display_terminal: str | None = None
    """The id of its display terminal, where the client shows a local job's output."""
    stopped_by_user: bool = False
    started_at: float = field(default_factory=time.monotonic)
    output: OutputBuffer = field(default_factory=OutputBuffer)
    cursor: int = 0
    """Offset of the first byte the model has not read."""
    end: JobEnd | None = None
    ended_at: float | None = None
    stop_requested: bool = False
    end_told: bool = False
    """The model has heard of the end (a read that reached it, a note, or its kill)."""
    stop: Stop | None = None
    """Ends the job's process (set by its runner)."""
    refresh: Stop | None = None
    """Fetches new output (editor terminals, which push nothing); None: output is pushed."""
    _change: anyio.Event = field(default_factory=anyio.Event, repr=False)
    _ended: anyio.Event = field(default_factory=anyio.Event, repr=False)

    @property
    def running(self) -> bool:
        return self.end is None

    @property
    def has_news(self) -> bool:
        """Output the model has not read, or an end it has not been told of."""
        return self.cursor < self._readable_end() or (self.end is not None and not self.end_told)

    def _readable_end(self) -> int:
        """Where a read now ends: a character cut at the end waits while the job runs."""
        if self.end is not None:
            return self.output.total
        return self.output.total - _incomplete_utf8_suffix(self.output.last(4))

    def age(self, now: float | None = None) -> float:
        return (self.ended_at or now or time.monotonic()) - self.started_at

    def add_output(self, data: bytes) -> None:
        if data:
            self.output.add(data)
            self._signal()

    def finish(self, end: JobEnd) -> None:
        if self.end is None:
            self.end = end
            self.ended_at = time.monotonic()
            self._ended.set()
            self._signal()

    async def next_change(self) -> None:
        """Until new output arrives or the job ends."""
        await self._change.wait()

    async def wait_ended(self) -> None:
        await self._ended.wait()

    async def kill(self) -> None:
        """Stop the job and wait (bounded) for its end."""
        if self.end is not None:
            return
        self.stop_requested = True
        with anyio.move_on_after(STOP_SECONDS, shield=True):
            if self.stop is not None:
                await self.stop()
            await self._ended.wait()

    def read(self) -> JobRead:
        """The output after the cursor, decoded (a character cut at the end waits for the
        next read while the job runs); the cursor moves past it."""
        head, gap, tail = self.output.since(self.cursor)
        end_offset = max(self.cursor, self._readable_end())
        held = self.output.total - end_offset
        if held:
            if tail:
                tail = tail[: max(0, len(tail) - held)]
            else:
                head = head[: max(0, len(head) - held)]
        text = head.decode("utf-8", errors="replace")
        if gap:
            text += f"\n[... {gap} bytes of output not kept ...]\n"
        text += tail.decode("utf-8", errors="replace")
        new_bytes = end_offset - self.cursor
        self.cursor = end_offset
        reached_end = self.end if self.end is not None and not held else None
        if reached_end is not None:
            self.end_told = True
        return JobRead(text, new_bytes, gap, reached_end)

    def _signal(self) -> None:
        change, self._change = self._change, anyio.Event()
        change.set()


class JobTable:
    """The jobs of one session, by id (`job-1`, `job-2` ...)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._count = 0
        self.closed = False
        """The session ended: its jobs were killed, and no new one may start."""

    def __iter__(self) -> Iterator[Job]:
        return iter(list(self._jobs.values()))

    def __len__(self) -> int:
        return len(self._jobs)

    def next_id(self) -> str:
        self._count += 1
        return f"job-{self._count}"

    def add(self, job: Job) -> None:
        self._jobs[job.id] = job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id.strip())

    @property
    def running(self) -> bool:
        return any(job.running for job in self._jobs.values())

    def shown_running(self) -> tuple[str, ...]:
        """The display terminals of the jobs that run now."""
        jobs = self._jobs.values()
        return tuple(j.display_terminal for j in jobs if j.running and j.display_terminal)

    def take_ended_notes(self) -> list[str]:
        """One line for each job that ended since the model last heard of it (then it has)."""
        notes = []
        for job in self._jobs.values():
            if job.end is None or job.end_told:
                continue
            job.end_told = True
            unread = job.output.total - job.cursor
            rest = f"; job_output {job.id} for its output" if unread else ""
            notes.append(
                f"[job {job.id} (`{short_command(job)}`) ended: {job.end.describe()}{rest}]"
            )
        return notes

    async def close(self) -> None:
        """Kill every running job (its whole process group, or its editor terminal, which
        its runner then releases), all at once and bounded; no new job starts afterwards."""
        self.closed = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_SECONDS):
            async with anyio.create_task_group() as group:
                for job in self._jobs.values():
                    if job.running:
                        group.start_soon(job.kill)

    def describe(self) -> str:
        """The jobs for the user (`/jobs`): id, state, age, output size, command."""
        if not self._jobs:
            return "No background jobs in this session."
        now = time.monotonic()
        lines = [
            f"- {job.id}: {'running' if job.end is None else job.end.describe()}, "
            f"{format_duration(job.age(now), SPELT_OUT)}, {_size(job.output.total)} of output"
            f"{', in an editor terminal' if job.where == 'terminal' else ''}: "
            f"`{short_command(job)}`"
            for job in self._jobs.values()
        ]
        return "Background jobs:\n" + "\n".join(lines)


def short_command(job: Job) -> str:
    command = " ".join(job.command.split())
    if len(command) <= NOTE_COMMAND_CHARS:
        return command
    return command[: NOTE_COMMAND_CHARS - 1] + "…"


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def _incomplete_utf8_suffix(data: bytes) -> int:
    """How many bytes at the end of `data` start a UTF-8 character they do not finish."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: its lead is further back
        if byte < 0xC0:
            return 0
        needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return back if needed > back else 0
    return 0


__all__ = ["HEAD_BYTES", "TAIL_BYTES", "Job", "JobEnd", "JobRead", "JobTable", "OutputBuffer"]
