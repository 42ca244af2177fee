"""ACP prompt content blocks -> the neutral user message.

A `resource_link` becomes a `ResourceLinkPart` with nothing read yet: the sessions room
reads what it points at before the turn (`sessions/mentions.py`). An embedded text resource
becomes the same with the text the editor sent; an embedded blob becomes an image when it
is one, a document when it is a PDF, else a note naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

from ..messages import DocumentPart, ImagePart, Message, Part, ResourceLinkPart, TextPart
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
                parts.append(ResourceLinkPart(block.uri, block.name, block.mime_type))
            case EmbeddedResourceContentBlock():
                parts.append(_embedded(block))
            case AudioContentBlock():
                raise RpcError(INVALID_PARAMS, "session/prompt: audio content is not supported")
    if not parts:
        raise RpcError(INVALID_PARAMS, "session/prompt: prompt is empty")
    return Message("user", parts)


IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Images every vision model takes; other image types stay a note."""
DOCUMENT_TYPES = frozenset({"application/pdf"})


def _embedded(
    block: EmbeddedResourceContentBlock,
) -> ResourceLinkPart | TextPart | ImagePart | DocumentPart:
    resource = block.resource
    if isinstance(resource, TextResourceContents):
        # A mention whose text the editor sent along (Zed's @file and selections): read
        # like any mention, from this text, so the same limit and line range apply.
        return ResourceLinkPart(
            resource.uri, _name_of(resource.uri), resource.mime_type, embedded_text=resource.text
        )
    assert isinstance(resource, BlobResourceContents)
    mime = (resource.mime_type or "application/octet-stream").lower()
    if mime in IMAGE_TYPES:
        return ImagePart(resource.blob, mime)
    if mime in DOCUMENT_TYPES:
        return DocumentPart(resource.blob, mime, resource.uri)
    return TextPart(f"[binary resource {resource.uri} ({mime}) omitted: not an image or PDF]")


def _name_of(uri: str) -> str:
    """The last segment of the URI's path (what the editor shows on its chip)."""
    path = unquote(urlsplit(uri).path).rstrip("/")
    return path.rsplit("/", 1)[-1] or uri
