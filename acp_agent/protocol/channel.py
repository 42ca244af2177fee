"""One session's way to the editor: turn events as `session/update`, questions as
`session/request_permission` (implements `sessions.channel.SessionChannel`).

Within `streaming()` text chunks are coalesced (see `coalesce.py`) by a flusher running
beside the turn; the user sees the text before any question and any other update.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

import anyio

from ..messages import Elicitation, ElicitationAnswer, TurnEvent
from ..tools import Decision, PermissionQuestion
from .coalesce import ChunkCoalescer


class _Client(Protocol):
    """What a channel uses of `client.ClientProxy`."""

    async def send_update(self, session_id: str, event: TurnEvent) -> None: ...

    async def request_permission(
        self, session_id: str, question: PermissionQuestion
    ) -> Decision: ...

    async def elicit(self, session_id: str, elicitation: Elicitation) -> ElicitationAnswer: ...


FLUSH_SECONDS = 1.0
"""Time allowed to send the text still held back when a turn ends (also when cancelled)."""


class ClientChannel:
    def __init__(self, client: _Client, session_id: str) -> None:
        self._client = client
        self._session_id = session_id
        self._coalescer: ChunkCoalescer | None = None

    async def emit(self, event: TurnEvent) -> None:
        if self._coalescer is not None:
            await self._coalescer.emit(event)
        else:
            await self._send(event)

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        if self._coalescer is not None:
            await self._coalescer.flush()
        return await self._client.request_permission(self._session_id, question)

    async def elicit(self, elicitation: Elicitation) -> ElicitationAnswer:
        if self._coalescer is not None:
            await self._coalescer.flush()
        return await self._client.elicit(self._session_id, elicitation)

    @asynccontextmanager
    async def streaming(self) -> AsyncIterator[None]:
        coalescer = ChunkCoalescer(self._send)
        self._coalescer = coalescer
        try:
            async with anyio.create_task_group() as flusher:
                flusher.start_soon(coalescer.run)
                try:
                    yield
                finally:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(FLUSH_SECONDS):
                        await coalescer.flush()
                    flusher.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The flusher never fails, so a group holds the turn's one error: unwrap it so
            # provider errors keep their type (and their readable message).
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            self._coalescer = None

    async def _send(self, event: TurnEvent) -> None:
        await self._client.send_update(self._session_id, event)
