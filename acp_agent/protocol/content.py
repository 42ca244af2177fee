"""ACP prompt content blocks -> the neutral user message.

A `resource_link` becomes a `ResourceLinkPart` with nothing read yet: the sessions room
reads what it points at before the turn (`sessions/mentions.py`). An embedded text resource
becomes the same with the text the editor sent; an embedded blob becomes an image when it
is one, a document when it is a PDF, else a note naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from ..messages import DocumentPart, ImagePart, Message, Part, ResourceLinkPart, TextPart
from .fields import Invalid, at, obj, optional_text, salvaged_text, text


def prompt_message(blocks: Sequence[dict[str, Any]]) -> Message:
    """The prompt's content blocks (objects, read by the schema's rules) as a user message;
    raises `Invalid` for a block the schema refuses, audio, or an empty prompt."""
    parts = [_part(block, f"prompt.{i}") for i, block in enumerate(blocks)]
    if not parts:
        raise Invalid("prompt: is empty")
    return Message("user", parts)


def _part(block: dict[str, Any], where: str) -> Part:
    match block.get("type"):
        case "text":
            return TextPart(text(block, "text", where))
        case "image":
            return ImagePart(
                data=text(block, "data", where), mime_type=text(block, "mimeType", where)
            )
        case "audio":
            text(block, "data", where)
            text(block, "mimeType", where)
            raise Invalid(f"{where}: audio content is not supported")
        case "resource_link":
            return ResourceLinkPart(
                text(block, "uri", where),
                text(block, "name", where),
                salvaged_text(block, "mimeType"),
            )
        case "resource":
            where = at(where, "resource")
            return _embedded(obj(block.get("resource"), where), where)
        case None:
            raise Invalid(f"{at(where, 'type')}: missing")
        case other:
            raise Invalid(f"{at(where, 'type')}: unknown content type {str(other)[:40]!r}")


IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Images every vision model takes; other image types stay a note."""
DOCUMENT_TYPES = frozenset({"application/pdf"})


def _embedded(
    resource: dict[str, Any], where: str
) -> ResourceLinkPart | TextPart | ImagePart | DocumentPart:
    uri = text(resource, "uri", where)
    if "text" in resource:
        # A mention whose text the editor sent along (Zed's @file and selections): read
        # like any mention, from this text, so the same limit and line range apply.
        return ResourceLinkPart(
            uri,
            _name_of(uri),
            salvaged_text(resource, "mimeType"),
            embedded_text=text(resource, "text", where),
        )
    if "blob" not in resource:
        raise Invalid(f"{where}: needs text or blob")
    blob = text(resource, "blob", where)
    mime = (optional_text(resource, "mimeType", where) or "application/octet-stream").lower()
    if mime in IMAGE_TYPES:
        return ImagePart(blob, mime)
    if mime in DOCUMENT_TYPES:
        return DocumentPart(blob, mime, uri)
    return TextPart(f"[binary resource {uri} ({mime}) omitted: not an image or PDF]")


def _name_of(uri: str) -> str:
    """The last segment of the URI's path (what the editor shows on its chip)."""
    path = unquote(urlsplit(uri).path).rstrip("/")
    return path.rsplit("/", 1)[-1] or uri
