"""What every provider offers the engine: one streamed model call at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from ..messages import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ResourceLinkPart,
    StreamEvent,
    TextPart,
    ToolResultPart,
    ToolSpec,
)


class UnsupportedPart(ValueError):
    """A part an API cannot carry in that role; a bug in the caller, not a user error."""


@dataclass(frozen=True, slots=True)
class Inputs:
    """What a model reads besides text (its config, else the catalog, decides)."""

    documents: bool = True
    images: bool = True


class _ReadsInputs(Protocol):
    def reads_documents(self, model_id: str) -> bool: ...

    def reads_images(self, model_id: str) -> bool: ...


def model_inputs(config: _ReadsInputs, model_id: str) -> Inputs:
    """What the provider config says `model_id` reads."""
    return Inputs(documents=config.reads_documents(model_id), images=config.reads_images(model_id))


def readable(message: Message, inputs: Inputs) -> Message:
    """`message` as a model that reads only `inputs` is sent it: each document or image it
    does not read (typed, mentioned or returned by a tool) becomes a note naming it, so the
    history stays sendable to every model a session switches to."""
    if inputs.documents and inputs.images:
        return message
    return Message(message.role, [_readable_part(part, inputs) for part in message.parts])


def _readable_part(part: Part, inputs: Inputs) -> Part:
    match part:
        case TextPart() | ImagePart() | DocumentPart():
            return _readable_media(part, inputs)
        case ResourceLinkPart(context=context) if context:
            return replace(part, context=tuple(_readable_media(item, inputs) for item in context))
        case ToolResultPart(content=content) if not inputs.images:
            return replace(
                part,
                content=tuple(
                    _image_note(item) if isinstance(item, ImagePart) else item for item in content
                ),
            )
    return part


def _readable_media(
    part: TextPart | ImagePart | DocumentPart, inputs: Inputs
) -> TextPart | ImagePart | DocumentPart:
    if isinstance(part, DocumentPart) and not inputs.documents:
        return TextPart(
            f"[document {part.name} ({part.mime_type}) not sent: this model is not set up to "
            "read documents (models[].documents in the agent's config)]"
        )
    if isinstance(part, ImagePart) and not inputs.images:
        return _image_note(part)
    return part


def _image_note(part: ImagePart) -> TextPart:
    return TextPart(
        f"[image ({part.mime_type}) not sent: this model does not read images "
        "(models[].images in the agent's config)]"
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
    speed: Literal["standard", "fast"] | None = None
    """"fast": the vendor's faster, pricier serving (OpenAI: priority processing); None for
    models that have none."""


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
