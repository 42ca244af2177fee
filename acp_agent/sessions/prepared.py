"""What only a prompt needs, built after `session/new` has answered.

The built-in tools (their modules: tens of ms of imports), the token encoder (tiktoken's
file, a fraction of a second when it is cached) and the turn machinery's modules
(`turn_side.py`) play no part in answering `session/new`.
Each is a `Prepared` value: built in a worker thread once the first session's answer is
out, and waited for by the first prompt if it is not ready by then. Code that needs one
synchronously (a `/status` before any prompt) builds it there and then, or waits for the
worker thread that is building it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

import anyio.to_thread
from anyio.abc import TaskGroup

log = logging.getLogger(__name__)

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class Prepared(Generic[T]):
    """A value built once, by whoever asks first: a worker thread (`start`), a prompt
    (`ready`), or synchronous code (`get`)."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build: Callable[[], T] | None = build
        self._value: T | None = None
        self._lock = threading.Lock()
        self._started = False

    @classmethod
    def of(cls, value: T) -> Prepared[T]:
        """A value that is ready already."""
        prepared = cls(lambda: value)
        prepared.get()
        return prepared

    @property
    def done(self) -> bool:
        return self._build is None

    def start(self, background: TaskGroup | None) -> None:
        """Build it in a worker thread (once); without a task group, `ready` builds it."""
        if not self._started and not self.done and background is not None:
            self._started = True
            background.start_soon(self._build_quietly)

    async def ready(self) -> T:
        """The value; built in a worker thread now, or waited for if one is building it."""
        if self._build is None:
            return self._value  # type: ignore[return-value]  # T itself may be Optional
        # A cancelled prompt need not wait for the build: the thread finishes it on its own.
        return await anyio.to_thread.run_sync(self.get, abandon_on_cancel=True)

    def get(self) -> T:
        """The value, built on this thread unless a worker thread is building it."""
        with self._lock:
            if self._build is not None:
                self._value = self._build()
                self._build = None
            return self._value  # type: ignore[return-value]

    async def _build_quietly(self) -> None:
        # A failure here must not end the connection's task group: the prompt that needs
        # the value builds it again and fails on its own.
        try:
            await anyio.to_thread.run_sync(self.get, abandon_on_cancel=True)
        except Exception:
            log.exception("preparing what a session's prompts need failed")


class PreparedMapping(Mapping[K, V]):
    """A mapping whose contents are a `Prepared` one (the built-in tools by name)."""

    def __init__(self, prepared: Prepared[Mapping[K, V]]) -> None:
        self.prepared = prepared

    def __getitem__(self, key: K) -> V:
        return self.prepared.get()[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self.prepared.get())

    def __len__(self) -> int:
        return len(self.prepared.get())
