"""Coalesce streamed text into at most one chunk per display frame.

A model can stream thousands of tiny deltas a second; an editor repaints at most once a
frame. The first chunk goes out at once; text arriving within the next frame is gathered
and sent when the frame ends, so a burst of 20,000 deltas becomes a few dozen notifications
while a slow stream is forwarded delta by delta.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable

import anyio

from ..messages import MessageChunk, ThoughtChunk, TurnEvent

FRAME_SECONDS = 0.016

Chunk = MessageChunk | ThoughtChunk


class ChunkCoalescer:
    def __init__(
        self, send: Callable[[TurnEvent], Awaitable[None]], frame: float = FRAME_SECONDS
    ) -> None:
        self._send = send
        self._frame = frame
        self._held_kind: type[Chunk] | None = None
        self._held_id: str | None = None
        """The `message_id` of the text held back: chunks of two messages never merge."""
        self._held: list[str] = []
        self._last_sent = -math.inf
        self._wake = anyio.Event()

    async def emit(self, event: TurnEvent) -> None:
        if not isinstance(event, (MessageChunk, ThoughtChunk)):
            await self.flush()
            await self._send(event)
            return
        if self._held_kind is not type(event) or self._held_id != event.message_id:
            await self.flush()
            self._held_kind, self._held_id = type(event), event.message_id
        self._held.append(event.text)
        # time.monotonic is the asyncio loop's clock, and far cheaper per delta than anyio's.
        if time.monotonic() - self._last_sent >= self._frame:
            await self.flush()
        else:
            self._wake.set()

    async def flush(self) -> None:
        if self._held_kind is None or not self._held:
            return
        chunk = self._held_kind("".join(self._held), self._held_id)
        self._held = []
        self._last_sent = time.monotonic()
        await self._send(chunk)

    async def run(self) -> None:
        """Send what is held back once its frame ends; run it beside the turn."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep(max(0.0, self._last_sent + self._frame - time.monotonic()))
            await self.flush()
