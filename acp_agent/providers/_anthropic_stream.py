"""Messages API stream events -> neutral events: one small state machine, no I/O.

`EventMapper.on_event` maps the events the SDK builds; `on_payload` reads the common deltas
(text, thinking, tool input) from an event's decoded JSON without building the SDK's event
object, the main cost of relaying a fast stream (parity tests prove both paths equal).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from anthropic import types as api

from ..messages import (
    ModelStopReason,
    Stop,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    Usage,
)
from ._anthropic_mapping import REDACTED_KEY, SIGNATURE_KEY
from .base import parse_tool_arguments

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

    def on_payload(self, payload: Any) -> Iterator[StreamEvent] | None:
        """The events of a text, thinking or tool-input delta, read from the event's decoded
        JSON; None for any other event, which `on_event` maps once the SDK built it.

        Nearly every event of a reply is such a delta; reading it straight from the JSON
        skips building the SDK's typed event, the main cost of relaying a fast stream.
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
                yield from self._input_json(event.index, delta.partial_json)

    def _input_json(self, index: int, partial: str) -> Iterator[StreamEvent]:
        tool = self._tools.get(index)
        if tool is not None and partial:
            tool.fragments.append(partial)
            yield ToolCallArgsDelta(id=tool.id, delta=partial)

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
