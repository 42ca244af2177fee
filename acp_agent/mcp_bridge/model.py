"""What the bridge hands the rooms above it: plain data, no SDK or ACP types.

Servers (`ServerStatus`), their tools and prompts (`McpToolInfo`, `McpPromptInfo`), tool
results (`McpToolResult` and its content), and what servers ask of us (`ElicitationRequest`,
`SamplingRequest`), answered through the callbacks in `HubHandlers`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..messages import ImagePart, Message, TextPart
from .editor import EditorMcp
from .specs import McpTransport

ServerState: TypeAlias = Literal["connecting", "ready", "failed", "closed"]


@dataclass(frozen=True, slots=True)
class McpToolInfo:
    server: str
    name: str
    """The tool's name on its server."""
    qualified_name: str
    """The name the model sees: `mcp__<server>__<tool>`, vendor-safe and collision-free."""
    title: str | None
    description: str
    input_schema: dict[str, Any]
    """Repaired where vendors would reject it (see `_schema.py`)."""
    read_only: bool = False
    """readOnlyHint: the server claims the tool changes nothing (believed only of a
    `trusted` server: see `changes_nothing`)."""
    destructive: bool = False
    """destructiveHint declared true (the MCP default for an unannotated tool is not taken:
    most servers annotate nothing, and asking without "always" for all of them would wear
    users out)."""
    open_world: bool = False
    """openWorldHint declared true: the tool reaches outside (the web, an API)."""
    trusted: bool = False
    """The user trusts the server (`trusted = true` in the config): its claims hold."""

    @property
    def changes_nothing(self) -> bool:
        """Treated as a read: the tool says so and its server is trusted. A destructive
        claim needs no trust (it only ever adds caution), and MCP gives it no meaning for
        a read-only tool."""
        return self.read_only and self.trusted


@dataclass(frozen=True, slots=True)
class PromptArgument:
    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, slots=True)
class McpPromptInfo:
    server: str
    name: str
    command: str
    """The slash command that runs it: `<server>:<prompt>`."""
    title: str | None
    description: str | None
    arguments: tuple[PromptArgument, ...] = ()


@dataclass(frozen=True, slots=True)
class PromptResult:
    description: str | None
    messages: tuple[Message, ...]
    """The prompt's messages (roles user / assistant), for the model."""


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    transport: McpTransport
    where: str
    """The command line or URL (never headers or env)."""
    state: ServerState
    error: str | None = None
    """Why the server failed."""
    stderr: tuple[str, ...] = ()
    """A stdio server's last stderr lines."""
    tools: tuple[str, ...] = ()
    """The tools' qualified names."""
    prompts: tuple[str, ...] = ()
    """The prompts' slash commands."""
    warnings: tuple[str, ...] = ()
    """Tools skipped or repaired, and why."""

    def describe_failure(self) -> str:
        """Which server, what failed, its last stderr lines."""
        what = self.error or ("closed" if self.state == "closed" else "not connected")
        text = f"MCP server {self.name!r} ({self.where}): {what}"
        if self.stderr:
            text += "\nLast lines of its stderr:\n" + "\n".join(f"  {line}" for line in self.stderr)
        return text

    def describe(self) -> str:
        """Several lines for `/mcp`: state, tools, prompts, warnings, failure."""
        if self.state in ("failed", "closed"):
            lines = [self.describe_failure()]
        else:
            lines = [f"MCP server {self.name!r} ({self.where}): {self.state}"]
        if self.tools:
            lines.append("  tools: " + ", ".join(self.tools))
        if self.prompts:
            lines.append("  prompts: " + ", ".join(f"/{p}" for p in self.prompts))
        lines.extend(f"  warning: {warning}" for warning in self.warnings)
        return "\n".join(lines)


# --- tool results ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AudioContent:
    data: str
    """Base64."""
    mime_type: str


@dataclass(frozen=True, slots=True)
class ResourceContent:
    """An embedded resource: its text, or its bytes (base64) in `blob`."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceLinkContent:
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


McpContent: TypeAlias = TextPart | ImagePart | AudioContent | ResourceContent | ResourceLinkContent

EMPTY_RESULT = "(the tool returned no content)"


@dataclass(frozen=True, slots=True)
class McpToolResult:
    content: tuple[McpContent, ...]
    structured: dict[str, Any] | None = None
    is_error: bool = False

    def bounded(self, head: int, tail: int, media_bytes: int) -> McpToolResult:
        """This result within limits, as a shell command's output is: of all its text (text
        parts, resources' text, structured content) the first `head` and last `tail`
        characters, with a marker where the middle was cut and a closing note saying how
        much; images past `media_bytes` (all of them together) as notes. Structured content
        too long to keep whole is dropped, its JSON cut with the text when no text says it.
        Nothing of the whole is kept, so it can be freed at once."""
        content = list(self.content)
        structured = self.structured
        if structured is not None:
            as_json = json.dumps(structured, ensure_ascii=False)
            if len(as_json) > head + tail:
                structured = None
                if not any(isinstance(item, TextPart) for item in content):
                    content.append(TextPart(as_json))
        content, omitted = _cut_texts(content, head, tail)
        content = _media_within(content, media_bytes)
        if omitted:
            content.append(
                TextPart(
                    f"[result truncated: {omitted} characters from the middle were left out; "
                    "ask the tool for less at a time]"
                )
            )
        return McpToolResult(tuple(content), structured, self.is_error)

    def model_parts(self) -> tuple[TextPart | ImagePart, ...]:
        """What the model reads: text and images as they are, resources as text (an image
        resource as the image), structured content as JSON when no text says it already."""
        parts = list(content_for_model(self.content))
        if self.structured is not None and not any(isinstance(p, TextPart) for p in parts):
            parts.append(TextPart(json.dumps(self.structured, ensure_ascii=False)))
        return tuple(parts) or (TextPart(EMPTY_RESULT),)

    @property
    def text(self) -> str:
        """The result as text only (images described), e.g. for an error message."""
        return "\n".join(
            part.text if isinstance(part, TextPart) else f"[image ({part.mime_type})]"
            for part in self.model_parts()
        )


def content_for_model(items: Sequence[McpContent]) -> tuple[TextPart | ImagePart, ...]:
    """MCP content as the model reads it (tool results, prompt messages)."""
    return tuple(_for_model(item) for item in items)


def _for_model(item: McpContent) -> TextPart | ImagePart:
    match item:
        case TextPart() | ImagePart():
            return item
        case AudioContent(data=data, mime_type=mime):
            return TextPart(f"[audio ({mime}), {_decoded_size(data)} bytes: not shown]")
        case ResourceContent(uri=uri, text=str(text)):
            return TextPart(f"[resource {uri}]\n{text}")
        case ResourceContent(uri=uri, mime_type=mime, blob=str(blob)):
            if mime and mime.startswith("image/"):
                return ImagePart(blob, mime)
            return TextPart(f"[resource {uri} ({mime or 'binary'}), {_decoded_size(blob)} bytes]")
        case ResourceContent(uri=uri):
            return TextPart(f"[resource {uri}]")
        case ResourceLinkContent():
            about = f": {item.description}" if item.description else ""
            kind = f" ({item.mime_type})" if item.mime_type else ""
            return TextPart(f"[resource link {item.name} {item.uri}{kind}{about}]")


def _media_within(items: list[McpContent], budget: int) -> list[McpContent]:
    """`items` with the images past `budget` decoded bytes (in order) replaced by notes."""
    kept: list[McpContent] = []
    for item in items:
        match item:
            case (
                ImagePart(data=data, mime_type=mime)
                | ResourceContent(mime_type=str(mime), blob=str(data))
            ) if mime.startswith("image/"):
                size = _base64_size(data)
                if size > budget:
                    kept.append(TextPart(f"[image ({mime}), {size} bytes: too large, not shown]"))
                    continue
                budget -= size
        kept.append(item)
    return kept


def _base64_size(data: str) -> int:
    """The bytes `data` (base64) decodes to, without decoding it."""
    return len(data) * 3 // 4 - (2 if data.endswith("==") else 1 if data.endswith("=") else 0)


def _cut_texts(items: list[McpContent], head: int, tail: int) -> tuple[list[McpContent], int]:
    """Of the text of all `items` taken as one, the first `head` and the last `tail`
    characters, with a marker in the item where the cut starts; items wholly inside the
    cut are left out. Returns the items and how many characters were left out."""
    total = sum(len(text) for item in items if (text := _text_of(item)) is not None)
    if total <= head + tail:
        return items, 0
    omitted = total - head - tail
    marker = f"\n[... {omitted} characters omitted ...]\n"
    kept: list[McpContent] = []
    position = 0
    for item in items:
        text = _text_of(item)
        if text is None:
            kept.append(item)
            continue
        item_start, position = position, position + len(text)
        head_end = head - item_start  # this item's characters in the head
        tail_start = total - tail - item_start  # where its characters in the tail begin
        if head_end >= len(text) or tail_start <= 0:
            kept.append(item)  # wholly in the head or the tail
            continue
        opening = marker if head_end >= 0 else ""  # the cut starts in this item
        left = text[: max(0, head_end)] + opening + text[max(0, tail_start) :]
        if left:
            kept.append(_with_text(item, left))
    return kept, omitted


def _text_of(item: McpContent) -> str | None:
    match item:
        case TextPart(text=text) | ResourceContent(text=str(text)):
            return text
        case _:
            return None


def _with_text(item: McpContent, text: str) -> McpContent:
    return replace(item, text=text) if isinstance(item, ResourceContent) else TextPart(text)


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data)


@dataclass(frozen=True, slots=True)
class McpProgress:
    progress: float
    total: float | None = None
    message: str | None = None

    def describe(self) -> str:
        amount = f"{self.progress:g}" + (f"/{self.total:g}" if self.total is not None else "")
        return f"{self.message} ({amount})" if self.message else f"Progress: {amount}"


# --- what servers ask of us ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """A server asks the user for input: a form (`schema`, flat JSON schema of primitive
    fields) or a URL to open (`url`)."""

    server: str
    message: str
    mode: Literal["form", "url"] = "form"
    schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None


@dataclass(frozen=True, slots=True)
class ElicitationReply:
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    """accept: the values, keyed by the schema's properties."""


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    """A server asks our model for a completion."""

    server: str
    messages: tuple[Message, ...]
    system_prompt: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SamplingReply:
    text: str
    model: str
    stop_reason: str | None = "endTurn"


@dataclass(frozen=True, slots=True)
class HubHandlers:
    """The session's answers to what servers ask. Each runs in the hub's tasks; an
    exception is logged and answered to the server as an error."""

    roots: Callable[[], Sequence[Path]] | None = None
    """The session's roots for `roots/list`; None: the session's cwd."""
    elicit: Callable[[ElicitationRequest], Awaitable[ElicitationReply | None]] | None = None
    """Ask the user (ACP `elicitation/create`); return None to decline. None here: the
    elicitation capability is not advertised and a request is declined with a message."""
    sample: Callable[[SamplingRequest], Awaitable[SamplingReply]] | None = None
    """Run the session's model; used only when sampling is allowed (`mcp_allow_sampling`),
    otherwise sampling is not advertised and a request is declined with a message."""
    on_change: Callable[[ServerStatus], Awaitable[None]] | None = None
    """A server connected, failed, or changed its tools or prompts: report a failure to the
    user, offer the new tools from the next model request."""
    editor: EditorMcp | None = None
    """The editor's side of `mcp/message`, through which `acp` servers are reached; None:
    such a server fails, saying there is no editor to reach it through."""
