"""Neutral conversation -> Messages API request (the stream: `_anthropic_stream`).

Pure functions, no I/O. Each message becomes its blocks once (`message_blocks`, cached per
message by the provider); `to_params` (the SDK's arguments) and `to_body` (the same request
as JSON, from each block's cached encoding) put them into turns by the same rules (parity
tests prove the body equals what the SDK sends for those arguments). What the API insists
on, and this module guarantees:

- `max_tokens` is always sent, and exceeds the thinking budget when thinking is on;
- tool results travel as `tool_result` blocks in a user message, before any text;
- an assistant message sends its thinking back first, each block exactly as received
  (`provider_data["signature"]` / `provider_data["redacted_data"]`); thinking from another
  vendor has no signature and is dropped;
- thinking is only requested when the tool-use loop it would continue began with thinking;
- at most three cache breakpoints (system, last tool, last user message) of the four allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, assert_never, cast

from ..messages import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    model_parts,
)
from ._wire import body_with_pieces, dumps
from .base import ModelRequest, UnsupportedPart

if TYPE_CHECKING:
    # Annotations only: the SDK is not imported on the direct API's path.
    from anthropic import types as api

SIGNATURE_KEY = "signature"
"""`ThinkingPart.provider_data` key: the signature of a thinking block."""
REDACTED_KEY = "redacted_data"
"""`ThinkingPart.provider_data` key: the opaque payload of a redacted_thinking block."""

DEFAULT_MAX_TOKENS = 8192
"""`max_tokens` when the model config sets no `max_output_tokens` and thinking is off."""
THINKING_BUDGETS: Final[dict[str, int]] = {"low": 2048, "medium": 8192, "high": 24576}
MIN_THINKING_BUDGET = 1024
"""The API's floor for `budget_tokens`."""
THINKING_ANSWER_TOKENS = 16000
"""With thinking on and no configured cap: room for the answer on top of the budget ..."""
THINKING_MAX_TOKENS = 32000
"""... within the smallest output limit of the thinking models (Claude Opus 4 / 4.1)."""
MIN_ANSWER_TOKENS = 1024
"""With a configured cap, the budget leaves at least this much for the answer."""

_EPHEMERAL: Final[api.CacheControlEphemeralParam] = {"type": "ephemeral"}
_IMAGE_TYPES: Final[dict[str, Literal["image/jpeg", "image/png", "image/gif", "image/webp"]]] = {
    "image/jpeg": "image/jpeg",
    "image/jpg": "image/jpeg",
    "image/png": "image/png",
    "image/gif": "image/gif",
    "image/webp": "image/webp",
}


# --- request ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestParams:
    """The arguments of `messages.create`, apart from the model and `stream`."""

    max_tokens: int
    messages: list[api.MessageParam]
    system: list[api.TextBlockParam]
    tools: list[api.ToolParam]
    thinking: api.ThinkingConfigEnabledParam | None


@dataclass(slots=True)
class MessageBlocks:
    """One neutral message as content blocks of a user or assistant turn. Shared by every
    request that carries the message: never changed once made."""

    role: Literal["user", "assistant"]
    blocks: list[api.ContentBlockParam]
    has_tool_result: bool = False
    joined: bytes | None = None
    """The blocks' JSON, comma-separated, made when `to_body` first needs it."""

    def encoded(self) -> bytes:
        if self.joined is None:
            self.joined = _join(self.blocks)
        return self.joined


@dataclass(slots=True)
class _Turns:
    """The conversation as alternating user and assistant turns, without an object per
    turn (a long history would make thousands per request): turn `k` is `messages[
    starts[k]:starts[k + 1]]`, runs of consecutive messages of one role."""

    messages: list[MessageBlocks]
    """The messages that have blocks (the API rejects empty ones)."""
    starts: list[int]
    tails: dict[int, list[api.ContentBlockParam]]
    """Per turn: blocks that replace those of its last message, when one of them must
    differ from the shared ones (a cache breakpoint, stripped whitespace)."""

    def __len__(self) -> int:
        return len(self.starts)

    def role(self, turn: int) -> Literal["user", "assistant"]:
        return self.messages[self.starts[turn]].role

    def span(self, turn: int) -> range:
        end = self.starts[turn + 1] if turn + 1 < len(self.starts) else len(self.messages)
        return range(self.starts[turn], end)

    def last_blocks(self, turn: int) -> list[api.ContentBlockParam]:
        """The blocks of the turn's last message as sent (a copy, to change)."""
        tail = self.tails.get(turn)
        return list(self.messages[self.span(turn)[-1]].blocks if tail is None else tail)

    def blocks(self, turn: int) -> list[api.ContentBlockParam]:
        *head, last = self.span(turn)
        blocks = [block for index in head for block in self.messages[index].blocks]
        return blocks + self.tails.get(turn, self.messages[last].blocks)

    def encoded(self) -> list[bytes]:
        """The JSON of the turns, in pieces to join: `{"role":..,"content":[..]},...`."""
        messages, tails, pieces = self.messages, self.tails, list[bytes]()
        for turn, start in enumerate(self.starts):
            if turn:
                pieces.append(b"]},")
            pieces.append(_OPEN[messages[start].role])
            span = self.span(turn)
            for index in span:
                if index == span[-1] and turn in tails:
                    fragment = _join(tails[turn])
                else:
                    fragment = messages[index].encoded()
                if fragment:
                    if index != start:
                        pieces.append(b",")
                    pieces.append(fragment)
        if pieces:
            pieces.append(b"]}")
        return pieces


_OPEN: Final = {
    "user": b'{"role":"user","content":[',
    "assistant": b'{"role":"assistant","content":[',
}


def message_blocks(message: Message) -> MessageBlocks:
    match message.role:
        case "user":
            return MessageBlocks("user", _user_blocks(message.parts))
        case "assistant":
            return MessageBlocks("assistant", _assistant_blocks(message.parts))
        case "tool":
            return MessageBlocks("user", [_tool_result(part) for part in message.parts], True)
        case _:
            assert_never(message.role)


def _join(blocks: Iterable[api.ContentBlockParam]) -> bytes:
    return b",".join(dumps(block) for block in blocks)


def to_params(
    request: ModelRequest, *, caching: bool, blocks: Sequence[MessageBlocks] | None = None
) -> RequestParams:
    """The arguments of `messages.create`; `blocks`: `message_blocks` of each message of
    the request, if the caller has them already."""
    if blocks is None:
        blocks = [message_blocks(message) for message in request.messages]
    turns, budget = _turns(request, blocks, caching=caching)
    return RequestParams(
        max_tokens=_max_tokens(request.max_output_tokens, budget),
        messages=[_message_param(turns, turn) for turn in range(len(turns))],
        system=to_system(request.system, caching=caching),
        tools=to_tools(request.tools, caching=caching),
        thinking={"type": "enabled", "budget_tokens": budget} if budget is not None else None,
    )


def to_body(request: ModelRequest, blocks: Sequence[MessageBlocks], *, caching: bool) -> bytes:
    """The JSON body `messages.create(..., stream=True)` sends for `to_params`' arguments."""
    turns, budget = _turns(request, blocks, caching=caching)
    fields: dict[str, Any] = {
        "max_tokens": _max_tokens(request.max_output_tokens, budget),
        "model": request.model,
        "stream": True,
    }
    if system := to_system(request.system, caching=caching):
        fields["system"] = system
    if budget is not None:
        fields["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if tools := to_tools(request.tools, caching=caching):
        fields["tools"] = tools
    return body_with_pieces(fields, "messages", turns.encoded())


def _turns(
    request: ModelRequest, blocks: Sequence[MessageBlocks], *, caching: bool
) -> tuple[_Turns, int | None]:
    """The conversation as alternating turns, and the thinking budget it allows."""
    turns = _to_turns(blocks)
    budget = _thinking_budget(request) if _may_think(turns) else None
    if caching:
        _mark_last_user_block(turns)
    return turns, budget


def to_system(system: str, *, caching: bool) -> list[api.TextBlockParam]:
    if not system:
        return []
    block: api.TextBlockParam = {"type": "text", "text": system}
    if caching:
        block["cache_control"] = _EPHEMERAL
    return [block]


def to_tools(tools: Iterable[ToolSpec], *, caching: bool) -> list[api.ToolParam]:
    result: list[api.ToolParam] = [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]
    if caching and result:
        result[-1]["cache_control"] = _EPHEMERAL
    return result


def _thinking_budget(request: ModelRequest) -> int | None:
    if request.thought_level is None or request.thought_level == "off":
        return None
    budget = THINKING_BUDGETS[request.thought_level]
    if request.max_output_tokens is not None:
        budget = min(budget, request.max_output_tokens - MIN_ANSWER_TOKENS)
    return budget if budget >= MIN_THINKING_BUDGET else None


def _max_tokens(limit: int | None, budget: int | None) -> int:
    if limit is not None:
        return limit
    if budget is None:
        return DEFAULT_MAX_TOKENS
    return min(budget + THINKING_ANSWER_TOKENS, THINKING_MAX_TOKENS)


def _to_turns(messages: Sequence[MessageBlocks]) -> _Turns:
    kept = [message for message in messages if message.blocks]
    starts = [
        index
        for index, message in enumerate(kept)
        if not index or message.role != kept[index - 1].role  # tool results, then words
    ]
    turns = _Turns(kept, starts, {})
    if turns and turns.role(len(turns) - 1) == "assistant":
        _strip_trailing_whitespace(turns)
    return turns


def _message_param(turns: _Turns, turn: int) -> api.MessageParam:
    if turns.role(turn) == "user":
        return {"role": "user", "content": turns.blocks(turn)}
    return {"role": "assistant", "content": turns.blocks(turn)}


def _user_blocks(parts: Sequence[Part]) -> list[api.ContentBlockParam]:
    blocks: list[api.ContentBlockParam] = []
    for part in model_parts(parts):
        match part:
            case TextPart():
                if part.text:
                    blocks.append(_text(part.text))
            case ImagePart():
                blocks.append(_image(part))
            case DocumentPart():
                blocks.append(_document(part))
            case _:
                raise UnsupportedPart(f"a user message cannot carry {type(part).__name__}")
    return blocks


def _assistant_blocks(parts: Sequence[Part]) -> list[api.ContentBlockParam]:
    thinking: list[api.ContentBlockParam] = []
    others: list[api.ContentBlockParam] = []
    for part in parts:
        match part:
            case ThinkingPart():
                thinking.extend(_thinking_blocks(part))
            case TextPart():
                if part.text:
                    others.append(_text(part.text))
            case ToolCallPart():
                others.append(_tool_use(part))
            case _:
                raise UnsupportedPart(f"an assistant message cannot carry {type(part).__name__}")
    return thinking + others  # the API wants the thinking that led to a reply before it


def _thinking_blocks(part: ThinkingPart) -> list[api.ContentBlockParam]:
    data = part.provider_data or {}
    blocks: list[api.ContentBlockParam] = []
    signature = data.get(SIGNATURE_KEY)
    if isinstance(signature, str) and signature:
        blocks.append({"type": "thinking", "thinking": part.text, "signature": signature})
    redacted = data.get(REDACTED_KEY)
    if isinstance(redacted, str) and redacted:
        blocks.append({"type": "redacted_thinking", "data": redacted})
    return blocks  # unsigned thinking (another vendor's) cannot be verified: not sent


def _tool_use(part: ToolCallPart) -> api.ToolUseBlockParam:
    return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}


def _tool_result(part: Part) -> api.ToolResultBlockParam:
    if not isinstance(part, ToolResultPart):
        raise UnsupportedPart(f"a tool message cannot carry {type(part).__name__}")
    content: list[api.TextBlockParam | api.ImageBlockParam] = [
        _image(item) if isinstance(item, ImagePart) else _text(item.text)
        for item in part.content
        if isinstance(item, ImagePart) or item.text
    ]
    block: api.ToolResultBlockParam = {"type": "tool_result", "tool_use_id": part.tool_call_id}
    if content:
        block["content"] = content
    if part.is_error:
        block["is_error"] = True
    return block


def _text(text: str) -> api.TextBlockParam:
    return {"type": "text", "text": text}


def _image(part: ImagePart) -> api.ImageBlockParam | api.TextBlockParam:
    media_type = _IMAGE_TYPES.get(part.mime_type.lower())
    if media_type is None:
        # Described, not raised: the image stays in the history and would fail every call.
        return _text(f"[image ({part.mime_type}) not sent: the API takes JPEG, PNG, GIF, WebP]")
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": part.data},
    }


def _document(part: DocumentPart) -> api.DocumentBlockParam | api.TextBlockParam:
    if part.mime_type.lower() != "application/pdf":
        return _text(f"[document {part.name} ({part.mime_type}) not sent: the API takes PDF]")
    return {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": part.data},
        "title": part.name,
    }


def _strip_trailing_whitespace(turns: _Turns) -> None:
    # A final assistant message (continuing a paused turn) must not end in whitespace.
    final = len(turns) - 1
    tail = turns.last_blocks(final)
    last = tail[-1]
    if last["type"] == "text":
        text = last["text"].rstrip()
        if text:
            tail[-1] = {**last, "text": text}
        else:
            tail.pop()
        turns.tails[final] = tail
        if not tail and len(turns.span(final)) == 1:  # the turn is empty: not sent
            del turns.tails[final]
            del turns.messages[turns.starts.pop() :]


def _may_think(turns: _Turns) -> bool:
    """Thinking cannot start in the middle of a tool-use loop that began without it."""
    for turn in range(len(turns) - 1, -1, -1):
        if turns.role(turn) != "assistant":
            continue
        after = turns.span(turn + 1) if turn + 1 < len(turns) else range(0)
        if not any(turns.messages[index].has_tool_result for index in after):
            return True
        first = turns.messages[turns.starts[turn]].blocks[0]["type"]
        return first in ("thinking", "redacted_thinking")
    return True


def _mark_last_user_block(turns: _Turns) -> None:
    for turn in range(len(turns) - 1, -1, -1):
        if turns.role(turn) == "user":
            tail = turns.last_blocks(turn)
            block = tail[-1]
            if block["type"] in ("text", "image", "document", "tool_result"):
                tail[-1] = cast("api.ContentBlockParam", {**block, "cache_control": _EPHEMERAL})
                turns.tails[turn] = tail
            return


def error_type(body: object) -> str | None:
    """The `error.type` of an error body (`overloaded_error`, `rate_limit_error` ...)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    kind = error.get("type") if isinstance(error, Mapping) else None
    return kind if isinstance(kind, str) else None


def error_message(body: object, fallback: str) -> str:
    """The message of an error body: {"type": "error", "error": {"type": ..., "message":
    ...}} from Anthropic; proxies and gateways may answer with text or HTML instead."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            message = error.get("message")
            if isinstance(message, str) and message:
                return message
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return fallback
