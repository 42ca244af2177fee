"""The prompt queue: each prompt's place taken when its frame is read, its turn run in that
place, and cancels that reach every place taken before them (ARCHITECTURE rule 10).

The places live in the session (`Session.take_place`, `PromptTickets`), or, while it is
let go, beside it in `live.py`, so a prompt keeps its place and a cancel its reach.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..messages import Message
from .lifecycle import Lifecycle
from .live import Live, LiveSessions
from .outcomes import PromptOutcome
from .servers import McpServers
from .session import QueuePlace

if TYPE_CHECKING:
    from .turn_side import TurnSide
    from .turns import Inserted

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PromptQueue:
    """Every session's prompts in their places, and the cancels that reach them."""

    live: LiveSessions
    lifecycle: Lifecycle
    servers: McpServers
    turn_side: Callable[[], Awaitable[TurnSide]]
    """What turns need, built after the first session's answer (waited for if not yet)."""

    def take_place(self, session_id: str) -> QueuePlace | None:
        """Called as a prompt's frame is read: its place in its session's queue, or None
        when no such session exists (the prompt then fails on its own)."""
        entry = self.live.get(session_id)
        if entry is not None:
            return entry.session.take_place()
        parked = self.live.parked(session_id)  # it keeps its place while let go
        return parked.tickets.take() if parked is not None else None

    async def prompt(
        self,
        session_id: str,
        message: Message,
        place: QueuePlace | None = None,
        inserted: Inserted | None = None,
    ) -> PromptOutcome:
        """Run the prompt in its `place`: the next prompt of the session runs once the
        place is released, which is the caller's part. Without one, it takes a place now
        and releases it itself."""
        side = await self.turn_side()
        entry = await self.lifecycle.use(session_id)
        if place is not None:
            return await self._prompt(side, entry, message, place, inserted)
        own = entry.session.take_place()
        try:
            return await self._prompt(side, entry, message, own, inserted)
        finally:
            own.release()

    async def _prompt(
        self,
        side: TurnSide,
        entry: Live,
        message: Message,
        place: QueuePlace,
        inserted: Inserted | None,
    ) -> PromptOutcome:
        from .commands import slash_command  # loaded with the turn side

        session = entry.session
        with self.live.using(session.id):
            if (stop := await self.servers.wait_connected(session, place)) is not None:
                return PromptOutcome(stop)
            if side.runner.project.refresh(session):  # a prompt file came, went or changed
                await side.commands.announce(session)
            command = slash_command(message)
            if command is not None and (outcome := await side.commands.run(entry, *command, place)):
                return outcome
            # The turn is built when its queue slot comes: a prompt that waited uses the
            # model and mode chosen meanwhile.
            stop = await session.run_turn(
                lambda: side.runner.run(session, entry.writer, message, inserted=inserted), place
            )
            return PromptOutcome(stop)

    def cancel(self, session_id: str) -> None:
        entry = self.live.get(session_id)
        parked = self.live.parked(session_id)
        if entry is not None:
            entry.session.cancel()
        elif parked is not None:
            parked.tickets.cancel()
        else:
            log.warning("cancel for unknown session %s ignored", session_id)

    def cancel_all(self) -> None:
        for entry in self.live:
            entry.session.cancel()
        for parked in self.live.parked_sessions():
            parked.tickets.cancel()
