"""Neutral conversation -> Messages API request, and stream events -> neutral events.

Pure functions and one small state machine, no I/O. What the API insists on, and this module
guarantees:

- `max_tokens` is always sent, and exceeds the thinking budget when thinking is on;
- tool results travel as `tool_result` blocks in a user message, before any text;
- an assistant message sends its thinking back first, each block exactly as received
  (`provider_data["signature"]` / `provider_data["redacted_data"]`); thinking from another
  vendor has no signature and is dropped;
- thinking is only requested when the tool-use loop it would continue began with thinking;
- at most three cache breakpoints (system, last tool, last user message) of the four allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, assert_never

from anthropic import types as api

from ..messages import (
    ImagePart,
    Message,
    ModelStopReason,
    Part,
    Stop,
    StreamEvent,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from .base import ModelRequest, parse_tool_arguments

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
_STOP_REASONS: Final[dict[str, ModelStopReason]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_use",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}


class UnsupportedPart(ValueError):
    """A part this API cannot carry in that role; a bug in the caller, not a user error."""


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
class _Turn:
    role: Literal["user", "assistant"]
    blocks: list[api.ContentBlockParam]


def to_params(request: ModelRequest, *, caching: bool) -> RequestParams:
    turns = _to_turns(request.messages)
    budget = _thinking_budget(request) if _may_think(turns) else None
    if caching:
        _mark_last_user_block(turns)
    return RequestParams(
        max_tokens=_max_tokens(request.max_output_tokens, budget),
        messages=[_message_param(turn) for turn in turns],
        system=to_system(request.system, caching=caching),
        tools=to_tools(request.tools, caching=caching),
        thinking={"type": "enabled", "budget_tokens": budget} if budget is not None else None,
    )


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


def _to_turns(messages: Sequence[Message]) -> list[_Turn]:
    turns: list[_Turn] = []
    for message in messages:
        role: Literal["user", "assistant"]
        match message.role:
            case "user":
                role, blocks = "user", _user_blocks(message.parts)
            case "assistant":
                role, blocks = "assistant", _assistant_blocks(message.parts)
            case "tool":
                role, blocks = "user", [_tool_result(part) for part in message.parts]
            case _:
                assert_never(message.role)
        if not blocks:
            continue  # the API rejects empty messages
        if turns and turns[-1].role == role:
            turns[-1].blocks.extend(blocks)  # tool results, then the user's next words
        else:
            turns.append(_Turn(role, blocks))
    if turns and turns[-1].role == "assistant":
        _strip_trailing_whitespace(turns)
    return turns


def _message_param(turn: _Turn) -> api.MessageParam:
    if turn.role == "user":
        return {"role": "user", "content": turn.blocks}
    return {"role": "assistant", "content": turn.blocks}


def _user_blocks(parts: Sequence[Part]) -> list[api.ContentBlockParam]:
    blocks: list[api.ContentBlockParam] = []
    for part in parts:
        match part:
            case TextPart():
                if part.text:
                    blocks.append(_text(part.text))
            case ImagePart():
                blocks.append(_image(part))
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


def _strip_trailing_whitespace(turns: list[_Turn]) -> None:
    # A final assistant message (continuing a paused turn) must not end in whitespace.
    blocks = turns[-1].blocks
    last = blocks[-1]
    if last["type"] == "text":
        text = last["text"].rstrip()
        if text:
            last["text"] = text
        else:
            blocks.pop()
            if not blocks:
                turns.pop()


def _may_think(turns: Sequence[_Turn]) -> bool:
    """Thinking cannot start in the middle of a tool-use loop that began without it."""
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].role != "assistant":
            continue
        after = turns[index + 1].blocks if index + 1 < len(turns) else []
        if not any(block["type"] == "tool_result" for block in after):
            return True
        first = turns[index].blocks[0]["type"]
        return first in ("thinking", "redacted_thinking")
    return True


def _mark_last_user_block(turns: Sequence[_Turn]) -> None:
    for turn in reversed(turns):
        if turn.role == "user":
            block = turn.blocks[-1]
            if (
                block["type"] == "text"
                or block["type"] == "image"
                or block["type"] == "tool_result"
            ):
                block["cache_control"] = _EPHEMERAL
            return


# --- stream -------------------------------------------------------------------------------


@dataclass(slots=True)
class _ToolBlock:
    id: str
    name: str
    initial: dict[str, Any]
    fragments: list[str] = field(default_factory=list)


class EventMapper:
    """Turns stream events into neutral events; `finish` reports usage and the stop.

    Each thinking block ends with a `ThinkingDelta` that carries `{"signature": ...}` in its
    `provider_data`; a redacted block is one `ThinkingDelta("", {"redacted_data": ...})`.
    """

    def __init__(self) -> None:
        self.finished = False
        """`message_stop` arrived: the stream is complete."""
        self._tools: dict[int, _ToolBlock] = {}
        self._calls = 0
        self._stop_reason: str | None = None
        self._input = self._output = self._cache_read = self._cache_write = 0

    def on_event(self, event: api.RawMessageStreamEvent) -> Iterator[StreamEvent]:
        # Class and tag both: the SDK builds an unknown event as the union's first class.
        match event:
            case api.RawMessageStartEvent(type="message_start"):
                self._on_message_start(event)
            case api.RawContentBlockStartEvent(type="content_block_start"):
                yield from self._on_block_start(event)
            case api.RawContentBlockDeltaEvent(type="content_block_delta"):
                yield from self._on_block_delta(event)
            case api.RawContentBlockStopEvent(type="content_block_stop"):
                yield from self._on_block_stop(event)
            case api.RawMessageDeltaEvent(type="message_delta"):
                self._on_message_delta(event)
            case api.RawMessageStopEvent(type="message_stop"):
                self.finished = True

    def finish(self) -> Iterator[StreamEvent]:
        for index in sorted(self._tools):  # never left open by a complete stream; defensive
            yield from self._on_block_stop(
                api.RawContentBlockStopEvent(type="content_block_stop", index=index)
            )
        yield Usage(
            input_tokens=self._input,
            output_tokens=self._output,
            cache_read_tokens=self._cache_read,
            cache_write_tokens=self._cache_write,
        )
        yield Stop(self._stop())

    def _on_message_start(self, event: api.RawMessageStartEvent) -> None:
        usage = event.message.usage
        self._input = usage.input_tokens or 0
        self._output = usage.output_tokens or 0
        self._cache_read = usage.cache_read_input_tokens or 0
        self._cache_write = usage.cache_creation_input_tokens or 0

    def _on_block_start(self, event: api.RawContentBlockStartEvent) -> Iterator[StreamEvent]:
        match event.content_block:
            case api.TextBlock(type="text") as block:
                if block.text:
                    yield TextDelta(block.text)
            case api.ThinkingBlock(type="thinking") as block:
                if block.thinking:
                    yield ThinkingDelta(block.thinking)
            case api.RedactedThinkingBlock(type="redacted_thinking") as block:
                yield ThinkingDelta("", provider_data={REDACTED_KEY: block.data})
            case api.ToolUseBlock(type="tool_use") as block:
                self._tools[event.index] = _ToolBlock(block.id, block.name, dict(block.input or {}))
                self._calls += 1
                yield ToolCallStart(id=block.id, name=block.name)

    def _on_block_delta(self, event: api.RawContentBlockDeltaEvent) -> Iterator[StreamEvent]:
        match event.delta:
            case api.TextDelta(type="text_delta") as delta:
                if delta.text:
                    yield TextDelta(delta.text)
            case api.ThinkingDelta(type="thinking_delta") as delta:
                if delta.thinking:
                    yield ThinkingDelta(delta.thinking)
            case api.SignatureDelta(type="signature_delta") as delta:
                yield ThinkingDelta("", provider_data={SIGNATURE_KEY: delta.signature})
            case api.InputJSONDelta(type="input_json_delta") as delta:
                tool = self._tools.get(event.index)
                if tool is not None and delta.partial_json:
                    tool.fragments.append(delta.partial_json)
                    yield ToolCallArgsDelta(id=tool.id, delta=delta.partial_json)

    def _on_block_stop(self, event: api.RawContentBlockStopEvent) -> Iterator[StreamEvent]:
        tool = self._tools.pop(event.index, None)
        if tool is not None:
            raw = "".join(tool.fragments)
            arguments = parse_tool_arguments(raw) if raw.strip() else tool.initial
            yield ToolCallEnd(ToolCallPart(id=tool.id, name=tool.name, arguments=arguments))

    def _on_message_delta(self, event: api.RawMessageDeltaEvent) -> None:
        if event.delta.stop_reason is not None:
            self._stop_reason = event.delta.stop_reason
        usage = event.usage  # cumulative counts; the input ones only on newer API versions
        self._output = usage.output_tokens or self._output
        if usage.input_tokens is not None:
            self._input = usage.input_tokens
        if usage.cache_read_input_tokens is not None:
            self._cache_read = usage.cache_read_input_tokens
        if usage.cache_creation_input_tokens is not None:
            self._cache_write = usage.cache_creation_input_tokens

    def _stop(self) -> ModelStopReason:
        reason = _STOP_REASONS.get(self._stop_reason or "", "end_turn")
        # "tool_use" without a single call would leave the engine nothing to run.
        return "end_turn" if reason == "tool_use" and not self._calls else reason
