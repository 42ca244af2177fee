"""Each history message's vendor form, made once instead of on every request.

A request carries the whole conversation, and the conversation only grows: converting and
serialising every message again each turn made a turn's cost grow with the history (a
1,000-turn session spent a second per request in the OpenAI SDK alone). A provider keeps
one `MessageCache` and asks it for the converted form of every message of a request; a
message seen before comes from the cache.

A message counts as seen when the same object comes again with the same parts: the same
number of them and the same last part (a tool message filling up with results is converted
again). Parts replaced in place are not noticed: parts are immutable by convention, as
`usage.TokenCounter` assumes too. A history replaced by compaction brings new message
objects, which are converted afresh; the old entries age out.

Entries are keyed by `id(message)` and hold their message, so an id cannot be reused while
its entry lives. An entry that no request used during the last `keep` requests is
dropped, which bounds what the cache holds to the conversations in use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..messages import Message, Part
from .base import Inputs, readable

T = TypeVar("T")

KEEP_REQUESTS = 64
"""Requests an unused entry survives: sessions sharing a provider take turns."""
_SWEEP_EVERY = 16


@dataclass(slots=True)
class _Entry(Generic[T]):
    message: Message
    parts: int
    last_part: Part | None
    value: T
    used: int


class MessageCache(Generic[T]):
    """`convert(message)` for the messages of each request, remembered per message."""

    def __init__(self, convert: Callable[[Message], T], *, keep: int = KEEP_REQUESTS) -> None:
        self._convert = convert
        self._keep = keep
        self._entries: dict[int, _Entry[T]] = {}
        self._requests = 0

    def __len__(self) -> int:
        return len(self._entries)

    def values(self, messages: Sequence[Message]) -> list[T]:
        """The converted form of each message, in order. Exceptions of `convert` propagate
        (and nothing is remembered for that message)."""
        self._requests += 1
        now = self._requests
        entries = self._entries
        result: list[T] = []
        for message in messages:
            parts = message.parts
            last = parts[-1] if parts else None
            entry = entries.get(id(message))
            if (
                entry is None
                or entry.message is not message
                or entry.parts != len(parts)
                or entry.last_part is not last
            ):
                entry = _Entry(message, len(parts), last, self._convert(message), now)
                entries[id(message)] = entry
            else:
                entry.used = now
            result.append(entry.value)
        if now % _SWEEP_EVERY == 0:
            self._sweep(now - self._keep)
        return result

    def clear(self) -> None:
        self._entries.clear()

    def _sweep(self, oldest: int) -> None:
        stale = [key for key, entry in self._entries.items() if entry.used < oldest]
        for key in stale:
            del self._entries[key]


class ConvertedMessages(Generic[T]):
    """`convert(readable(message, inputs))` for the messages of each request: a
    `MessageCache` per kind of model input, as a session may switch between models of one
    provider that read different inputs (a PDF for one is a note for the other)."""

    def __init__(self, convert: Callable[[Message], T]) -> None:
        self._convert = convert
        self._caches: dict[Inputs, MessageCache[T]] = {}

    def values(self, messages: Sequence[Message], inputs: Inputs) -> list[T]:
        cache = self._caches.get(inputs)
        if cache is None:
            convert = self._convert
            cache = MessageCache(lambda message: convert(readable(message, inputs)))
            self._caches[inputs] = cache
        return cache.values(messages)
