"""Messages API stream events -> neutral events: one small state machine, no I/O.

Both read an event's decoded JSON, never the SDK's typed event (so `anthropic` is not
imported): `EventMapper.on_payload` takes the common deltas (text, thinking, tool input) in
one quick look, `on_event` every event, leniently: a member of the wrong type counts as
absent, as in the SDK's lenient build (parity tests prove both paths equal).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from ..messages import (
    ModelStopReason,
    Stop,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    Usage,
)
from ._anthropic_mapping import REDACTED_KEY, SIGNATURE_KEY
from ._tool_calls import StreamedCall, parse_tool_arguments

_STOP_REASONS: Final[dict[str, ModelStopReason]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_use",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}


@dataclass(slots=True)
class _ToolBlock(StreamedCall):
    initial: dict[str, Any] = field(default_factory=dict)
    """The input the block started with: the call's arguments when no fragment follows."""


class EventMapper:
    """Turns stream events into neutral events; `finish` reports usage and the stop.

    Each thinking block ends with a `ThinkingDelta` that carries `{"signature": ...}` in its
    `provider_data`; a redacted block is one `ThinkingDelta("", {"redacted_data": ...})`.
    Both are marked `ends_block`: the API wants every block back whole and apart.
    """

    def __init__(self) -> None:
        self.finished = False
        """`message_stop` arrived: the stream is complete."""
        self._tools: dict[object, _ToolBlock] = {}
        self._calls = 0
        self._stop_reason: str | None = None
        self._input = self._output = self._cache_read = self._cache_write = 0

    def on_payload(self, payload: Any) -> Iterator[StreamEvent] | None:
        """The events of a text, thinking or tool-input delta, in one quick look at the
        event's JSON; None for any other event, which `on_event` maps.
        """
        if type(payload) is not dict or payload.get("type") != "content_block_delta":
            return None
        delta = payload.get("delta")
        if type(delta) is not dict:
            return None
        match delta.get("type"):
            case "text_delta":
                text = delta.get("text")
                if type(text) is not str:
                    return None
                return iter((TextDelta(text),) if text else ())
            case "thinking_delta":
                thinking = delta.get("thinking")
                if type(thinking) is not str:
                    return None
                return iter((ThinkingDelta(thinking),) if thinking else ())
            case "input_json_delta":
                partial = delta.get("partial_json")
                index = payload.get("index")
                if type(partial) is not str or type(index) is not int:
                    return None
                return self._input_json(index, partial)
        return None

    def on_event(self, event: Any) -> Iterator[StreamEvent]:
        if type(event) is not dict:
            return
        index = event.get("index")
        match event.get("type"):
            case "message_start":
                self._on_message_start(_object(event.get("message")))
            case "content_block_start":
                yield from self._on_block_start(index, _object(event.get("content_block")))
            case "content_block_delta":
                yield from self._on_block_delta(index, _object(event.get("delta")))
            case "content_block_stop":
                yield from self._on_block_stop(index)
            case "message_delta":
                self._on_message_delta(_object(event.get("delta")), _object(event.get("usage")))
            case "message_stop":
                self.finished = True

    def finish(self) -> Iterator[StreamEvent]:
        for index in list(self._tools):  # never left open by a complete stream; defensive
            yield from self._on_block_stop(index)
        yield Usage(
            input_tokens=self._input,
            output_tokens=self._output,
            cache_read_tokens=self._cache_read,
            cache_write_tokens=self._cache_write,
        )
        yield Stop(self._stop())

    def _on_message_start(self, message: dict[str, Any]) -> None:
        usage = _object(message.get("usage"))
        self._input = _count(usage.get("input_tokens"))
        self._output = _count(usage.get("output_tokens"))
        self._cache_read = _count(usage.get("cache_read_input_tokens"))
        self._cache_write = _count(usage.get("cache_creation_input_tokens"))

    def _on_block_start(self, index: object, block: dict[str, Any]) -> Iterator[StreamEvent]:
        if block.get("type") != "tool_use":
            yield from _content(block)
            return
        call_id, name = _text(block.get("id")) or "", _text(block.get("name")) or ""
        self._tools[index] = _ToolBlock(call_id, name, initial=dict(_object(block.get("input"))))
        self._calls += 1
        yield ToolCallStart(id=call_id, name=name)

    def _on_block_delta(self, index: object, delta: dict[str, Any]) -> Iterator[StreamEvent]:
        if delta.get("type") == "input_json_delta":
            yield from self._input_json(index, _text(delta.get("partial_json")) or "")
        else:
            yield from _content(delta)

    def _input_json(self, index: object, partial: str) -> Iterator[StreamEvent]:
        if (tool := self._tools.get(index)) is not None:
            yield from tool.more_arguments(partial)

    def _on_block_stop(self, index: object) -> Iterator[StreamEvent]:
        tool = self._tools.pop(index, None)
        if tool is not None:
            raw = "".join(tool.fragments)
            arguments = parse_tool_arguments(raw) if raw.strip() else tool.initial
            yield ToolCallEnd(ToolCallPart(id=tool.id, name=tool.name, arguments=arguments))

    def _on_message_delta(self, delta: dict[str, Any], usage: dict[str, Any]) -> None:
        if reason := _text(delta.get("stop_reason")):
            self._stop_reason = reason
        # Cumulative counts; the input ones only on newer API versions.
        self._output = _count(usage.get("output_tokens")) or self._output
        if type(tokens := usage.get("input_tokens")) is int:
            self._input = tokens
        if type(tokens := usage.get("cache_read_input_tokens")) is int:
            self._cache_read = tokens
        if type(tokens := usage.get("cache_creation_input_tokens")) is int:
            self._cache_write = tokens

    def _stop(self) -> ModelStopReason:
        reason = _STOP_REASONS.get(self._stop_reason or "", "end_turn")
        # "tool_use" without a single call would leave the engine nothing to run.
        return "end_turn" if reason == "tool_use" and not self._calls else reason


def _content(block: dict[str, Any]) -> Iterator[StreamEvent]:
    """The text or thinking of a block's start or of a delta (both name it alike)."""
    match block.get("type"):
        case "text" | "text_delta":
            if text := _text(block.get("text")):
                yield TextDelta(text)
        case "thinking" | "thinking_delta":
            if thinking := _text(block.get("thinking")):
                yield ThinkingDelta(thinking)
        case "redacted_thinking":
            yield _block_end({REDACTED_KEY: block.get("data")})
        case "signature_delta":
            yield _block_end({SIGNATURE_KEY: block.get("signature")})


def _block_end(provider_data: dict[str, Any]) -> ThinkingDelta:
    """The delta that completes a thinking block: its signature, or a redacted block whole."""
    return ThinkingDelta("", provider_data, ends_block=True)


def _object(value: object) -> dict[str, Any]:
    return value if type(value) is dict else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int:
    return value if type(value) is int else 0
