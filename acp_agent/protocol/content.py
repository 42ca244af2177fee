"""ACP prompt content blocks -> the neutral user message."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import ImagePart, Message, Part, TextPart
from ..rpc.errors import INVALID_PARAMS, RpcError
from .schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


def prompt_message(blocks: Sequence[PromptBlock]) -> Message:
    parts: list[Part] = []
    for block in blocks:
        match block:
            case TextContentBlock():
                parts.append(TextPart(block.text))
            case ImageContentBlock():
                parts.append(ImagePart(data=block.data, mime_type=block.mime_type))
            case ResourceContentBlock():
                parts.append(TextPart(f"[@{block.name}]({block.uri})"))
            case EmbeddedResourceContentBlock():
                parts.append(_embedded(block))
            case AudioContentBlock():
                raise RpcError(INVALID_PARAMS, "session/prompt: audio content is not supported")
    if not parts:
        raise RpcError(INVALID_PARAMS, "session/prompt: prompt is empty")
    return Message("user", parts)


def _embedded(block: EmbeddedResourceContentBlock) -> TextPart:
    resource = block.resource
    if isinstance(resource, TextResourceContents):
        return TextPart(f'<context uri="{resource.uri}">\n{resource.text}\n</context>')
    assert isinstance(resource, BlobResourceContents)
    mime = resource.mime_type or "application/octet-stream"
    return TextPart(f"[binary resource {resource.uri} ({mime}) omitted]")
