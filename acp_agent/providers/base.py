"""What every provider offers the engine: one streamed model call at a time."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..messages import INVALID_JSON_KEY, DocumentPart, Message, StreamEvent, ToolSpec


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """Streamed argument text as an object; what is not a JSON object arrives raw, so the
    engine can tell the model its arguments did not parse."""
    if not raw.strip():
        return {}  # servers send nothing at all for a tool without parameters
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError:
        return {INVALID_JSON_KEY: raw}
    return arguments if isinstance(arguments, dict) else {INVALID_JSON_KEY: raw}


def document_note(part: DocumentPart) -> str:
    """What a model that is not sent documents reads instead of one."""
    return (
        f"[document {part.name} ({part.mime_type}) not sent: this model is not set up to "
        "read documents (models[].documents in the agent's config)]"
    )


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

    async def aclose(self) -> None:
        """Release the HTTP client and its connections; called once, at shutdown."""
        ...
