"""The answers to one JSON-RPC batch, gathered into the one array that answers it.

JSON-RPC 2.0 (and the ACP v2 transports page): a batch of requests gets one array with a
response per request, in any order, matched by id; notifications get none; an invalid
entry gets its own -32600 with id null inside the array; a batch that needs no response
(notifications only) gets nothing at all, never `[]`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

Send = Callable[[list[dict[str, Any]]], Awaitable[None]]


class BatchReply:
    """Counts the responses a batch owes and sends them together once all are in."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._owed = 0
        self._responses: list[dict[str, Any]] = []
        self._sealed = False
        self._sent = anyio.Event()

    def owe(self) -> None:
        """One more entry will answer (a request, or an invalid entry)."""
        self._owed += 1

    async def add(self, response: dict[str, Any]) -> None:
        self._responses.append(response)
        await self._send_if_complete()

    async def seal(self) -> None:
        """Every entry has been read: the batch is answered once its last answer is in."""
        self._sealed = True
        await self._send_if_complete()

    async def sent(self) -> None:
        """Until the array is written (a response's follow-up runs after that)."""
        await self._sent.wait()

    async def _send_if_complete(self) -> None:
        if not self._sealed or len(self._responses) < self._owed or self._sent.is_set():
            return
        try:
            if self._responses:  # nothing at all for notifications only
                await self._send(self._responses)
        finally:
            self._sent.set()
