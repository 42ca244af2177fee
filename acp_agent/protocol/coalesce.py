"""Coalesce streamed text into at most one chunk per display frame.

A model can stream thousands of tiny deltas a second; an editor repaints at most once a
frame. The first chunk goes out at once; text arriving within the next frame is merged and
sent when the frame ends, so a burst of 20,000 deltas becomes a few dozen notifications
while a slow stream is forwarded delta by delta.
"""

from __future__ import annotations

import math
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
        self._pending: Chunk | None = None
        self._last_sent = -math.inf
        self._wake = anyio.Event()

    async def emit(self, event: TurnEvent) -> None:
        if not isinstance(event, (MessageChunk, ThoughtChunk)):
            await self.flush()
            await self._send(event)
            return
        if self._pending is not None and type(self._pending) is not type(event):
            await self.flush()
        self._pending = _merge(self._pending, event)
        if anyio.current_time() - self._last_sent >= self._frame:
            await self.flush()
        else:
            self._wake.set()

    async def flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            self._last_sent = anyio.current_time()
            await self._send(pending)

    async def run(self) -> None:
        """Send what is held back once its frame ends; run it beside the turn."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep_until(self._last_sent + self._frame)
            await self.flush()


def _merge(held: Chunk | None, new: Chunk) -> Chunk:
    if held is None:
        return new
    return type(new)(held.text + new.text)
