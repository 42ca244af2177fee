"""A provider that cannot be used (its plugin failed to load): every call fails saying why.

Standing in for the real one keeps the failure where it belongs: the other providers of
the configuration work, the model picker still lists this one's models, and choosing one
of them gives a readable error instead of taking the agent down.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from types import TracebackType

from ..messages import StreamEvent
from .base import ModelRequest
from .errors import ProviderError


class Unusable:
    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        return _Refused(ProviderError(self.name, f"cannot be used: {self.reason}"))

    async def aclose(self) -> None:
        pass


class _Refused(AbstractAsyncContextManager[AsyncIterator[StreamEvent]]):
    def __init__(self, error: ProviderError) -> None:
        self._error = error

    async def __aenter__(self) -> AsyncIterator[StreamEvent]:
        raise self._error

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None
