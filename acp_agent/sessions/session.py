"""A session: its own cwd, roots, history and choices, and at most one running turn.

Prompts that arrive while a turn runs wait their turn in arrival order (editors such as
`acpx` queue follow-ups, and refusing them would lose the user's message). `cancel()`
stops the running turn and every prompt queued behind it: a user who presses stop means
"stop", not "go on with the next message". A prompt takes its place in the queue when its
frame is read (`take_place`), so a cancel read after it finds it even if its task has not
started yet, and its turn runs only once every earlier place has been released, whatever
the earlier prompt still had to do first (a `QueuePlace` is released by whoever holds it
when its prompt ends, however it ends). The places live in `PromptTickets`, which
outlive the `Session` object when the manager lets an idle session go and opens it again
(`live.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ..config import Speed, ThoughtLevel
from ..messages import CommandInfo, EditorPrompt, Message, Notice, TurnStopReason
from ..providers.usage import UsageMeter
from ..tools.base import SessionToolState
from ..tools.permissions import DEFAULT_MODE, PermissionMemory, PermissionMode

if TYPE_CHECKING:
    from .project import ProjectView

log = logging.getLogger(__name__)


@dataclass
class PromptTickets:
    """The places taken in a session's prompt queue, how far a cancel reached, and which
    places have ended: a place's turn runs only once every earlier place has ended."""

    taken: int = 0
    cancelled_through: int = 0
    _ended: set[int] = field(default_factory=set, repr=False)
    _ended_through: int = 0
    """Every place up to this one has ended."""
    _moved: anyio.Event | None = field(default=None, repr=False)

    def take(self) -> QueuePlace:
        self.taken += 1
        return QueuePlace(self.taken, self)

    def cancel(self) -> None:
        """Every place taken so far is cancelled."""
        self.cancelled_through = self.taken
        self._wake()

    def cancelled(self, place: QueuePlace) -> bool:
        return place.number <= self.cancelled_through

    def end(self, number: int) -> None:
        if number <= self._ended_through:
            return
        self._ended.add(number)
        while self._ended_through + 1 in self._ended:
            self._ended_through += 1
            self._ended.discard(self._ended_through)
        self._wake()

    async def wait_for_earlier(self, place: QueuePlace) -> None:
        """Until every place before `place` has ended, or `place` is cancelled."""
        while self._ended_through < place.number - 1 and not self.cancelled(place):
            if self._moved is None:
                self._moved = anyio.Event()
            await self._moved.wait()

    @property
    def settled(self) -> bool:
        """Every place taken has ended: no prompt waits or runs."""
        return self._ended_through == self.taken

    def _wake(self) -> None:
        if self._moved is not None:
            self._moved.set()
            self._moved = None


@dataclass(frozen=True, slots=True)
class QueuePlace:
    """A prompt's place in its session's queue, taken as its frame is read (ARCHITECTURE
    rule 10). Whoever holds it releases it once the prompt has ended, or failed before it
    began (releasing twice is harmless): the next place's turn waits for that."""

    number: int
    tickets: PromptTickets = field(repr=False, compare=False)

    def release(self) -> None:
        self.tickets.end(self.number)


@dataclass
class Session:
    id: str
    cwd: Path
    roots: tuple[Path, ...]
    """The cwd first, then the additional directories."""
    model_choice: str
    """'provider/model' answering the next model request."""
    thought_level: ThoughtLevel | None = None
    """Reasoning effort chosen by the user; None means the model's default."""
    speed: Speed | None = None
    """Serving speed chosen by the user (models with `fast`); None: standard."""
    mode: PermissionMode = DEFAULT_MODE
    history: list[Message] = field(default_factory=list)
    """The working context sent to the model (after compaction: a summary, then the rest)."""
    summarised: int = 0
    """How many messages of the full history (the log) the summary opening `history`
    stands for; 0 while the session was never compacted. The full history is these plus
    the rest of `history`: every message appended to one is appended to the other."""
    permissions: PermissionMemory = field(default_factory=PermissionMemory)
    tool_state: SessionToolState = field(default_factory=SessionToolState)
    usage: UsageMeter = field(default_factory=UsageMeter)
    title: str | None = None
    title_chosen: bool = False
    """The user named it (`session/set_title`): no automatic title replaces that one."""
    commands_shown: tuple[CommandInfo, ...] | None = None
    """The slash commands the editor was last told of."""
    pending_notices: list[Notice] = field(default_factory=list, repr=False)
    """What the user is told once the editor knows the session, after its commands: why
    a stored session opened on another model than it had."""
    editor_prompt: EditorPrompt | None = None
    """The editor's system prompt (ACP `systemPrompt`), as last given."""
    project: ProjectView | None = field(default=None, repr=False)
    """What it knows of its project (`project.ProjectKnowledge`), made on first use."""
    parent_id: str | None = None
    """A subagent's: the session that started it (its MCP servers are the parent's)."""
    depth: int = 0
    """0 for a session the editor opened; a subagent's is its parent's plus one."""
    allowed_tools: frozenset[str] | None = None
    """A subagent's tools, when its parent named them; None: the parent's."""
    children: list[str] = field(default_factory=list, repr=False)
    """The subagents it started in this process: closing it ends them."""

    tickets: PromptTickets = field(default_factory=PromptTickets, repr=False)

    _turn_lock: anyio.Lock = field(default_factory=anyio.Lock, repr=False)
    _running: anyio.CancelScope | None = field(default=None, repr=False)
    _aside: dict[anyio.CancelScope, anyio.Event] = field(default_factory=dict, repr=False)

    @property
    def additional_roots(self) -> tuple[Path, ...]:
        return self.roots[1:]

    @property
    def servers_of(self) -> str:
        """The session whose MCP servers this one uses: a subagent uses its parent's."""
        return self.parent_id or self.id

    def take_place(self) -> QueuePlace:
        """A prompt's place in the queue, taken as soon as its frame is read."""
        return self.tickets.take()

    async def run_turn(
        self, turn: Callable[[], Awaitable[TurnStopReason]], place: QueuePlace | None = None
    ) -> TurnStopReason:
        """Run `turn` once every earlier place has ended; `cancelled` if cancelled.

        A `place` handed in is the caller's to release (a prompt may run more than one
        turn in it); without one, the turn takes a place of its own and releases it."""
        own = place is None
        if place is None:
            place = self.take_place()
        try:
            await self.tickets.wait_for_earlier(place)
            async with self._turn_lock:
                if self.tickets.cancelled(place):
                    return "cancelled"
                with anyio.CancelScope() as scope:
                    self._running = scope
                    try:
                        return await turn()
                    finally:
                        self._running = None
                return "cancelled"
        finally:
            if own:
                place.release()

    def cancel(self) -> None:
        self.tickets.cancel()
        if self._running is not None:
            self._running.cancel()

    async def wait_idle(self) -> None:
        """Until no turn runs and no prompt waits (after `cancel`, promptly)."""
        async with self._turn_lock:
            pass

    @property
    def busy(self) -> bool:
        return self._running is not None

    @property
    def idle(self) -> bool:
        """No turn runs or waits (so no permission question is pending either), no work
        runs beside the turns, and no background job runs (it would die if let go)."""
        return (
            self._running is None
            and not self._turn_lock.locked()
            and self.tickets.settled
            and not self._aside
            and not self.tool_state.jobs.running
        )

    async def run_aside(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run `work` beside the turns (a title being written), until `end_aside`. Its
        failure is logged: it never takes the session, or the agent, down."""
        done = anyio.Event()
        with anyio.CancelScope() as scope:
            self._aside[scope] = done
            try:
                await work()
            except Exception:
                log.exception("session %s: work beside the turns failed", self.id)
            finally:
                del self._aside[scope]
                done.set()

    async def end_aside(self) -> None:
        """Cancel the work beside the turns and wait until it has ended (before the
        session's log closes: nothing is written to it afterwards)."""
        running = list(self._aside.items())
        for scope, _ in running:
            scope.cancel()
        for _, done in running:
            await done.wait()
