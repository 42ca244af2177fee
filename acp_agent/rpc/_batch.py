"""Where the responses owed for one frame go: each written alone (`Alone`), or, for a
JSON-RPC batch, gathered into the one array that answers it (`receive_batch`).

JSON-RPC 2.0 (and the ACP v2 transports page): a batch of requests gets one array with a
response per request, in any order, matched by id; notifications get none; an invalid
entry gets its own -32600 with id null inside the array; a batch that needs no response
(notifications only) gets nothing at all, never `[]`; an empty batch gets one -32600
object with id null.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from .errors import INVALID_REQUEST, RpcError
from .framing import encode_frame

Queue = Callable[[bytes], Awaitable[None]]
"""Hands one frame to the connection's writer."""


class Answers(Protocol):
    """What answers the messages of one frame: the endpoint writes every response, and
    every error of an invalid message, through one of these."""

    def owe(self) -> None:
        """One more request will answer."""
        ...

    async def add(self, frame: bytes) -> None:
        """A response owed, encoded (`encode_frame`)."""
        ...

    async def sent(self) -> None:
        """Until the responses added are on their way (a follow-up must come after)."""
        ...

    async def reject(self, request_id: int | str | None, error: RpcError) -> None:
        """An invalid message's error, under `request_id` where that is safe."""
        ...


def error_frame(request_id: int | str | None, error: RpcError) -> bytes:
    return encode_frame({"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()})


def is_response(message: dict[str, Any]) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


@dataclass(frozen=True, slots=True)
class Alone:
    """A message that came on its own: its response is its own frame, queued when ready
    (a follow-up queued after it is written after it)."""

    queue: Queue

    def owe(self) -> None:
        pass

    async def add(self, frame: bytes) -> None:
        await self.queue(frame)

    async def sent(self) -> None:
        pass

    async def reject(self, request_id: int | str | None, error: RpcError) -> None:
        await self.queue(error_frame(request_id, error))


class BatchReply:
    """Counts the responses a batch owes and sends them together once all are in."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        self._owed = 0
        self._frames: list[bytes] = []
        self._sealed = False
        self._sent = anyio.Event()

    def owe(self) -> None:
        self._owed += 1

    async def add(self, frame: bytes) -> None:
        self._frames.append(frame)
        await self._send_if_complete()

    async def sent(self) -> None:
        await self._sent.wait()

    async def reject(self, request_id: int | str | None, error: RpcError) -> None:
        # Always id null in a batch (the ACP v2 transports page): an invalid entry never
        # poses as a request's answer.
        self.owe()
        await self.add(error_frame(None, error))

    async def seal(self) -> None:
        """Every entry has been read: the batch is answered once its last answer is in."""
        self._sealed = True
        await self._send_if_complete()

    async def _send_if_complete(self) -> None:
        if not self._sealed or len(self._frames) < self._owed or self._sent.is_set():
            return
        try:
            if self._frames:  # nothing at all for notifications only
                # Each response is one encoded line already: the array is their join.
                entries = b",".join(frame.rstrip(b"\n") for frame in self._frames)
                await self._queue(b"[" + entries + b"]\n")
        finally:
            self._sent.set()


async def receive_batch(
    entries: list[Any],
    queue: Queue,
    *,
    on_response: Callable[[dict[str, Any]], None],
    on_call: Callable[[dict[str, Any], Answers], Awaitable[None]],
) -> None:
    """Each entry as if it came alone (requests run concurrently), answered together."""
    if not entries:
        await queue(error_frame(None, RpcError(INVALID_REQUEST, "an empty batch")))
        return
    batch = BatchReply(queue)
    try:
        for entry in entries:
            if not isinstance(entry, dict):  # a batch inside a batch too
                refusal = RpcError(INVALID_REQUEST, "a batch entry must be a JSON object")
                await batch.reject(None, refusal)
            elif is_response(entry):
                on_response(entry)
            else:
                await on_call(entry, batch)
    finally:
        # Whatever fails part way, the requests already started are answered, together.
        await batch.seal()
