"""Neutral conversation -> Responses API input items, and stream events -> neutral events.

Pure functions and one small state machine, no I/O. Requests are stateless (`store=false`),
so everything the model needs is sent every time, reasoning included:

- a reasoning output item (id, summary, encrypted_content) rides in the reply's
  `ThinkingPart.provider_data` under the key `REASONING_KEY_PREFIX + item id`, one key per
  item, so parts merged by the engine keep every item; it goes back as an input item in
  front of what followed it. Items without `encrypted_content` (the server stored nothing
  and would answer 404) and items that nothing followed are not sent back;
- function calls go back as `function_call` items, results as `function_call_output`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from openai.types.responses import (
    EasyInputMessageParam,
    FunctionToolParam,
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallOutputItemParam,
    ResponseFunctionToolCall,
    ResponseFunctionToolCallParam,
    ResponseIncompleteEvent,
    ResponseInputContentParam,
    ResponseInputImageParam,
    ResponseInputItemParam,
    ResponseInputTextParam,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseReasoningItemParam,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseRefusalDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response import Response
from openai.types.responses.response_input_param import FunctionCallOutput

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
from ._openai_chat_mapping import UnsupportedPart
from .base import parse_tool_arguments

REASONING_KEY_PREFIX = "openai_reasoning:"
"""`ThinkingPart.provider_data` keys that carry one Responses API reasoning item each."""

_SUMMARY_SEPARATOR = "\n\n"


class ResponseFailed(Exception):
    """The server ended the stream with `response.failed` or an `error` event."""

    def __init__(self, code: str | None, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- request ------------------------------------------------------------------------------


def to_input(messages: Sequence[Message]) -> list[ResponseInputItemParam]:
    items: list[ResponseInputItemParam] = []
    for message in messages:
        match message.role:
            case "user":
                items.append(_user_message(message.parts))
            case "assistant":
                items.extend(_assistant_items(message.parts))
            case "tool":
                items.extend(_tool_output(part) for part in message.parts)
            case _:
                assert_never(message.role)
    return items


def to_tools(tools: Iterable[ToolSpec]) -> list[FunctionToolParam]:
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            # The API defaults to strict, which rejects any schema with optional properties.
            "strict": False,
        }
        for tool in tools
    ]


def reasoning_data(item: ResponseReasoningItem) -> dict[str, Any] | None:
    """The provider_data that brings `item` back on the next request, if it can come back."""
    if not item.encrypted_content:
        return None
    kept: ResponseReasoningItemParam = {
        "type": "reasoning",
        "id": item.id,
        "summary": [{"type": "summary_text", "text": part.text} for part in item.summary],
        "encrypted_content": item.encrypted_content,
    }
    return {REASONING_KEY_PREFIX + item.id: kept}


def _user_message(parts: Sequence[Part]) -> EasyInputMessageParam:
    return {"role": "user", "content": [_user_content(part) for part in parts]}


def _user_content(part: Part) -> ResponseInputContentParam:
    match part:
        case TextPart():
            return _input_text(part)
        case ImagePart():
            return _input_image(part)
    raise UnsupportedPart(f"a user message cannot carry {type(part).__name__}")


def _input_text(part: TextPart) -> ResponseInputTextParam:
    return {"type": "input_text", "text": part.text}


def _input_image(part: ImagePart) -> ResponseInputImageParam:
    return {"type": "input_image", "image_url": _data_url(part), "detail": "auto"}


def _data_url(part: ImagePart) -> str:
    return f"data:{part.mime_type};base64,{part.data}"


def _assistant_items(parts: Sequence[Part]) -> list[ResponseInputItemParam]:
    items: list[ResponseInputItemParam] = []
    texts: list[str] = []

    def flush_text() -> None:
        if texts:
            items.append({"role": "assistant", "content": "".join(texts)})
            texts.clear()

    for part in parts:
        match part:
            case TextPart():
                texts.append(part.text)
            case ThinkingPart():
                flush_text()
                items.extend(_reasoning_items(part))
            case ToolCallPart():
                flush_text()
                items.append(_function_call(part))
            case _:
                raise UnsupportedPart(f"an assistant message cannot carry {type(part).__name__}")
    flush_text()
    # A reasoning item must be followed by the output it led to, or the API rejects it.
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def _reasoning_items(part: ThinkingPart) -> Iterator[ResponseReasoningItemParam]:
    # Thinking from another vendor (an Anthropic signature) or from Chat Completions has no
    # such keys: the text alone cannot be sent back, so it is left out.
    for key, value in (part.provider_data or {}).items():
        if key.startswith(REASONING_KEY_PREFIX) and (item := _reasoning_item(value)):
            yield item


def _reasoning_item(value: object) -> ResponseReasoningItemParam | None:
    """A stored reasoning item, rebuilt field by field: it may come from an old session log."""
    if not isinstance(value, Mapping) or value.get("type") != "reasoning":
        return None
    item_id, encrypted = value.get("id"), value.get("encrypted_content")
    if not (isinstance(item_id, str) and isinstance(encrypted, str) and encrypted):
        return None
    summary = value.get("summary")
    texts = [
        entry["text"]
        for entry in (summary if isinstance(summary, list) else [])
        if isinstance(entry, Mapping) and isinstance(entry.get("text"), str)
    ]
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in texts],
        "encrypted_content": encrypted,
    }


def _function_call(part: ToolCallPart) -> ResponseFunctionToolCallParam:
    return {
        "type": "function_call",
        "call_id": part.id,
        "name": part.name,
        "arguments": json.dumps(part.arguments),
    }


def _tool_output(part: Part) -> FunctionCallOutput:
    if not isinstance(part, ToolResultPart):
        raise UnsupportedPart(f"a tool message cannot carry {type(part).__name__}")
    prefix = "Error: " if part.is_error else ""
    if not any(isinstance(item, ImagePart) for item in part.content):
        text = prefix + (part.text or "(no output)")
        return {"type": "function_call_output", "call_id": part.tool_call_id, "output": text}
    output: list[ResponseFunctionCallOutputItemParam] = []
    if prefix:
        output.append({"type": "input_text", "text": prefix.strip()})
    for item in part.content:
        match item:
            case TextPart():
                output.append({"type": "input_text", "text": item.text})
            case ImagePart():
                output.append({"type": "input_image", "image_url": _data_url(item)})
    return {"type": "function_call_output", "call_id": part.tool_call_id, "output": output}


# --- stream -------------------------------------------------------------------------------


@dataclass
class _Call:
    id: str
    name: str
    fragments: list[str] = field(default_factory=list)


class ResponseEventMapper:
    """Turns stream events into neutral events; `finish` reports usage and the stop.

    Raises `ResponseFailed` on `response.failed` and `error` events.
    """

    def __init__(self) -> None:
        self.done = False
        """A terminal event (`response.completed` / `response.incomplete`) arrived."""
        self._calls: dict[int, _Call] = {}
        self._ended_calls = 0
        self._usage: Usage | None = None
        self._refused = False
        self._stop: ModelStopReason = "end_turn"
        self._thinking_at: tuple[int, int] | None = None
        """(output index, summary index) of the thinking text streamed last, while the
        stream is still in thinking; a new summary part after it gets a separator."""
        self._thought_items: set[int] = set()

    def on_event(self, event: ResponseStreamEvent) -> Iterator[StreamEvent]:
        match event:
            case ResponseTextDeltaEvent(delta=delta):
                yield from self._text(delta)
            case ResponseRefusalDeltaEvent(delta=delta):
                self._refused = True
                yield from self._text(delta)
            case ResponseReasoningSummaryTextDeltaEvent():
                yield from self._thinking(event.delta, event.output_index, event.summary_index)
            case ResponseReasoningTextDeltaEvent():
                yield from self._thinking(event.delta, event.output_index, event.content_index)
            case ResponseOutputItemAddedEvent(item=ResponseFunctionToolCall() as item):
                self._thinking_at = None
                self._calls[event.output_index] = _Call(id=item.call_id, name=item.name)
                yield ToolCallStart(id=item.call_id, name=item.name)
            case ResponseFunctionCallArgumentsDeltaEvent():
                call = self._calls.get(event.output_index)
                if call is not None and event.delta:
                    call.fragments.append(event.delta)
                    yield ToolCallArgsDelta(id=call.id, delta=event.delta)
            case ResponseOutputItemDoneEvent():
                yield from self._item_done(event.output_index, event.item)
            case ResponseCompletedEvent(response=response):
                self._end(response)
                self._stop = self._completed_stop()
            case ResponseIncompleteEvent(response=response):
                self._end(response)
                details = response.incomplete_details
                reason = details.reason if details is not None else None
                self._stop = "refusal" if reason == "content_filter" else "max_tokens"
            case ResponseFailedEvent(response=response):
                error = response.error
                if error is None:
                    raise ResponseFailed(None, "the model failed without saying why")
                raise ResponseFailed(error.code, error.message)
            case ResponseErrorEvent():
                raise ResponseFailed(event.code, event.message)
            case _:
                pass  # lifecycle events, annotations, built-in tools: nothing to report

    def finish(self) -> Iterator[StreamEvent]:
        if self._usage is not None:
            yield self._usage
        yield Stop(self._stop)

    def _text(self, delta: str) -> Iterator[StreamEvent]:
        if delta:
            self._thinking_at = None
            yield TextDelta(delta)

    def _thinking(self, delta: str, item: int, part: int) -> Iterator[StreamEvent]:
        if not delta:
            return
        if self._thinking_at is not None and self._thinking_at != (item, part):
            yield ThinkingDelta(_SUMMARY_SEPARATOR)
        self._thinking_at = (item, part)
        self._thought_items.add(item)
        yield ThinkingDelta(delta)

    def _item_done(self, index: int, item: object) -> Iterator[StreamEvent]:
        match item:
            case ResponseFunctionToolCall():
                yield from self._call_done(index, item)
            case ResponseReasoningItem():
                yield from self._reasoning_done(index, item)
            case ResponseOutputMessage():
                if any(part.type == "refusal" for part in item.content):
                    self._refused = True

    def _call_done(self, index: int, item: ResponseFunctionToolCall) -> Iterator[StreamEvent]:
        self._thinking_at = None
        call = self._calls.pop(index, None)
        if call is None:  # a server that announces the call only when it is complete
            call = _Call(id=item.call_id, name=item.name)
            yield ToolCallStart(id=call.id, name=call.name)
        raw = item.arguments if item.arguments is not None else "".join(call.fragments)
        if raw and not call.fragments:
            yield ToolCallArgsDelta(id=call.id, delta=raw)
        self._ended_calls += 1
        yield ToolCallEnd(
            ToolCallPart(id=call.id, name=call.name, arguments=parse_tool_arguments(raw))
        )

    def _reasoning_done(self, index: int, item: ResponseReasoningItem) -> Iterator[StreamEvent]:
        # The summary was streamed already, unless the server sends it only whole.
        text = ""
        if index not in self._thought_items:
            text = _SUMMARY_SEPARATOR.join(part.text for part in item.summary if part.text)
        data = reasoning_data(item)
        if text or data:
            if text and self._thinking_at is not None:
                text = _SUMMARY_SEPARATOR + text
            yield ThinkingDelta(text, data)

    def _end(self, response: Response) -> None:
        self.done = True
        if response.usage is not None:
            self._usage = _usage(response.usage)

    def _completed_stop(self) -> ModelStopReason:
        if self._ended_calls:
            return "tool_use"
        if self._refused:
            return "refusal"
        return "end_turn"


def _usage(usage: ResponseUsage) -> Usage:
    # `input_tokens` counts cached tokens too; `Usage` keeps the three kinds apart. Servers
    # other than OpenAI may leave the details out.
    details = getattr(usage, "input_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) or 0
    written = getattr(details, "cache_write_tokens", 0) or 0
    return Usage(
        input_tokens=max(0, (usage.input_tokens or 0) - cached - written),
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )
