"""A session: its own cwd, roots, history and model choice, and at most one running turn.

Prompts that arrive while a turn runs wait their turn in arrival order (editors such as
`acpx` queue follow-ups, and refusing them would lose the user's message). `cancel()`
stops the running turn and every prompt queued behind it: a user who presses stop means
"stop", not "go on with the next message".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ..config import ThoughtLevel
from ..messages import Message, TurnStopReason
from ..providers.usage import UsageMeter
from ..tools.base import SessionToolState
from ..tools.permissions import DEFAULT_MODE, PermissionMemory, PermissionMode


@dataclass
class Session:
    id: str
    cwd: Path
    roots: tuple[Path, ...]
    model_choice: str
    """'provider/model' answering the next prompt."""
    thought_level: ThoughtLevel | None = None
    """Reasoning effort chosen by the user; None means the model's default."""
    mode: PermissionMode = DEFAULT_MODE
    history: list[Message] = field(default_factory=list)
    permissions: PermissionMemory = field(default_factory=PermissionMemory)
    tool_state: SessionToolState = field(default_factory=SessionToolState)
    usage: UsageMeter = field(default_factory=UsageMeter)

    _turn_lock: anyio.Lock = field(default_factory=anyio.Lock, repr=False)
    _running: anyio.CancelScope | None = field(default=None, repr=False)
    _tickets_issued: int = field(default=0, repr=False)
    _cancelled_through: int = field(default=0, repr=False)

    async def run_turn(self, turn: Callable[[], Awaitable[TurnStopReason]]) -> TurnStopReason:
        """Run `turn` once every earlier prompt has finished; `cancelled` if cancelled."""
        self._tickets_issued += 1
        ticket = self._tickets_issued
        async with self._turn_lock:
            if ticket <= self._cancelled_through:
                return "cancelled"
            with anyio.CancelScope() as scope:
                self._running = scope
                try:
                    return await turn()
                finally:
                    self._running = None
            return "cancelled"

    def cancel(self) -> None:
        self._cancelled_through = self._tickets_issued
        if self._running is not None:
            self._running.cancel()

    @property
    def busy(self) -> bool:
        return self._running is not None
