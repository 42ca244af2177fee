"""What every provider offers the engine: one streamed model call at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol

from ..messages import Message, StreamEvent, ToolSpec


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_output_tokens: int | None = None
    thought_level: Literal["off", "low", "medium", "high"] | None = None
    """Reasoning effort / thinking budget; None for models without reasoning."""


class Provider(Protocol):
    name: str
    """The configured provider name, used in every error message."""

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        """Start one model call.

        Entering the context sends the request; iterating yields neutral events ending with
        `Stop`; leaving it (normally, on error or on cancellation) closes the HTTP stream.
        Failures raise `ProviderError` subclasses, never vendor exceptions.
        """
        ...
