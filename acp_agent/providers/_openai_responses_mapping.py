"""Neutral conversation -> Responses API input items, and stream events -> neutral events.

Pure functions and one small state machine, no I/O. `to_input` is the request mapping; the
provider sends what `encode_input` makes of each message (the same, serialised, cached per
message), and `ResponseEventMapper.on_payload` reads the hot delta, lifecycle and terminal
events from their JSON without the SDK; `on_event` maps every other event once the SDK
built it (`_openai_sdk`, parity tests prove both equal the full mapping).
Requests are stateless (`store=false`), so everything the model needs is sent every time,
reasoning included:

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
from typing import TYPE_CHECKING, Any, assert_never

from ..messages import (
    DocumentPart,
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
    model_parts,
)
from ._openai_chat_mapping import data_url, file_name
from ._tool_calls import StreamedCall, parse_tool_arguments, whole_tool_call
from ._wire import dumps
from .base import UnsupportedPart

if TYPE_CHECKING:
    # Annotations only; what `on_event` matches on comes from `_openai_sdk`, which the
    # provider loads (off the event loop) before the first event that needs it.
    from openai.types.responses import (
        EasyInputMessageParam,
        FunctionToolParam,
        ResponseFunctionCallOutputItemParam,
        ResponseFunctionToolCall,
        ResponseFunctionToolCallParam,
        ResponseInputContentParam,
        ResponseInputFileParam,
        ResponseInputImageParam,
        ResponseInputItemParam,
        ResponseInputTextParam,
        ResponseReasoningItem,
        ResponseReasoningItemParam,
        ResponseStreamEvent,
        ResponseUsage,
    )
    from openai.types.responses.response_input_param import FunctionCallOutput

REASONING_KEY_PREFIX = "openai_reasoning:"
"""`ThinkingPart.provider_data` keys that carry one Responses API reasoning item each."""

_SUMMARY_SEPARATOR = "\n\n"
# Events `ResponseEventMapper.on_event` passes over: no state, no output.
_IGNORED_EVENTS = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
        "response.function_call_arguments.done",
    }
)
_TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


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
        items.extend(input_items(message))
    return items


def input_items(message: Message) -> list[ResponseInputItemParam]:
    """The input items one neutral message becomes."""
    match message.role:
        case "user":
            return [_user_message(message.parts)]
        case "assistant":
            return _assistant_items(message.parts)
        case "tool":
            return [_tool_output(part) for part in message.parts]
        case _:
            assert_never(message.role)


def encode_input(message: Message) -> bytes:
    """`input_items(message)` as JSON list items (comma-separated, no brackets)."""
    return b",".join(dumps(item) for item in input_items(message))


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
    return {"role": "user", "content": [_user_content(part) for part in model_parts(parts)]}


def _user_content(part: Part) -> ResponseInputContentParam:
    match part:
        case TextPart():
            return _input_text(part)
        case ImagePart():
            return _input_image(part)
        case DocumentPart():
            return _input_file(part)
    raise UnsupportedPart(f"a user message cannot carry {type(part).__name__}")


def _input_text(part: TextPart) -> ResponseInputTextParam:
    return {"type": "input_text", "text": part.text}


def _input_image(part: ImagePart) -> ResponseInputImageParam:
    return {"type": "input_image", "image_url": data_url(part), "detail": "auto"}


def _input_file(part: DocumentPart) -> ResponseInputFileParam:
    return {
        "type": "input_file",
        "filename": file_name(part),
        "file_data": data_url(part),
    }


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
                output.append({"type": "input_image", "image_url": data_url(item)})
    return {"type": "function_call_output", "call_id": part.tool_call_id, "output": output}


# --- stream -------------------------------------------------------------------------------


class ResponseEventMapper:
    """Turns stream events into neutral events; `finish` reports usage and the stop.

    Raises `ResponseFailed` on `response.failed` and `error` events.
    """

    def __init__(self) -> None:
        self.done = False
        """A terminal event (`response.completed` / `response.incomplete`) arrived."""
        self._calls: dict[int, StreamedCall] = {}
        self._ended_calls = 0
        self._usage: Usage | None = None
        self._refused = False
        self._stop: ModelStopReason = "end_turn"
        self._thinking_at: tuple[int, int] | None = None
        """(output index, summary index) of the thinking text streamed last, while the
        stream is still in thinking; a new summary part after it gets a separator."""
        self._thought_items: set[int] = set()

    def on_payload(self, payload: Any) -> Iterator[StreamEvent] | None:
        """The events of a text, reasoning or argument delta, read from the event's decoded
        JSON; None for any other event, which `on_event` maps once the SDK built it.

        Nearly every event of a reply is such a delta; reading it straight from the JSON
        skips building the SDK's typed event, the main cost of relaying a fast stream. The
        lifecycle events the mapping ignores are skipped, and the terminal ones read here
        too: building the final `Response` (every output item kind of the API) first costs
        the SDK ~25 MiB of model machinery that nothing here needs.
        """
        kind = payload.get("type") if type(payload) is dict else None
        if kind in _IGNORED_EVENTS:
            return iter(())
        if kind in _TERMINAL_EVENTS:
            return self._terminal(kind, payload.get("response"))
        if kind is None or not kind.endswith(".delta"):
            return None
        delta = payload.get("delta")
        if type(delta) is not str:
            return None
        index = payload.get("output_index")
        match kind:
            case "response.output_text.delta":
                return self._text(delta)
            case "response.reasoning_summary_text.delta":
                part = payload.get("summary_index")
            case "response.reasoning_text.delta":
                part = payload.get("content_index")
            case "response.function_call_arguments.delta":
                if type(index) is not int:
                    return None
                return self._arguments(index, delta)
            case _:
                return None
        if type(index) is not int or type(part) is not int:
            return None
        return self._thinking(delta, index, part)

    def _terminal(self, kind: str, response: Any) -> Iterator[StreamEvent] | None:
        if type(response) is not dict:
            return None
        usage = response.get("usage")
        if usage is not None and type(usage) is not dict:
            return None
        match kind:
            case "response.completed":
                self._end(_json_usage(usage))
                self._stop = self._completed_stop()
            case "response.incomplete":
                details = response.get("incomplete_details")
                if details is not None and (type(details) is not dict or "reason" not in details):
                    return None
                self._end(_json_usage(usage))
                reason = details["reason"] if details is not None else None
                self._stop = "refusal" if reason == "content_filter" else "max_tokens"
            case _:  # response.failed
                error = response.get("error")
                if error is None:
                    return _failed(None, "the model failed without saying why")
                if type(error) is not dict or "code" not in error or "message" not in error:
                    return None
                return _failed(error["code"], error["message"])
        return iter(())

    def on_event(self, event: ResponseStreamEvent) -> Iterator[StreamEvent]:
        """The events of any event the SDK built (`_openai_sdk.response_event`)."""
        from . import _openai_sdk as sdk

        match event:
            case sdk.ResponseTextDeltaEvent(delta=delta):
                yield from self._text(delta)
            case sdk.ResponseRefusalDeltaEvent(delta=delta):
                self._refused = True
                yield from self._text(delta)
            case sdk.ResponseReasoningSummaryTextDeltaEvent():
                yield from self._thinking(event.delta, event.output_index, event.summary_index)
            case sdk.ResponseReasoningTextDeltaEvent():
                yield from self._thinking(event.delta, event.output_index, event.content_index)
            case sdk.ResponseOutputItemAddedEvent(item=sdk.ResponseFunctionToolCall() as item):
                self._thinking_at = None
                self._calls[event.output_index] = StreamedCall(item.call_id, item.name)
                yield ToolCallStart(id=item.call_id, name=item.name)
            case sdk.ResponseFunctionCallArgumentsDeltaEvent():
                yield from self._arguments(event.output_index, event.delta)
            case sdk.ResponseOutputItemDoneEvent():
                yield from self._item_done(event.output_index, event.item)
            case sdk.ResponseCompletedEvent(response=response):
                self._end(_sdk_usage(response.usage))
                self._stop = self._completed_stop()
            case sdk.ResponseIncompleteEvent(response=response):
                self._end(_sdk_usage(response.usage))
                details = response.incomplete_details
                reason = details.reason if details is not None else None
                self._stop = "refusal" if reason == "content_filter" else "max_tokens"
            case sdk.ResponseFailedEvent(response=response):
                error = response.error
                if error is None:
                    raise ResponseFailed(None, "the model failed without saying why")
                raise ResponseFailed(error.code, error.message)
            case sdk.ResponseErrorEvent():
                raise ResponseFailed(event.code, event.message)
            case _:
                pass  # lifecycle events, annotations, built-in tools: nothing to report

    def finish(self) -> Iterator[StreamEvent]:
        if self._usage is not None:
            yield self._usage
        yield Stop(self._stop)

    def _arguments(self, index: int, delta: str) -> Iterator[StreamEvent]:
        if (call := self._calls.get(index)) is not None:
            yield from call.more_arguments(delta)

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
        from . import _openai_sdk as sdk

        match item:
            case sdk.ResponseFunctionToolCall():
                yield from self._call_done(index, item)
            case sdk.ResponseReasoningItem():
                yield from self._reasoning_done(index, item)
            case sdk.ResponseOutputMessage():
                if any(part.type == "refusal" for part in item.content):
                    self._refused = True

    def _call_done(self, index: int, item: ResponseFunctionToolCall) -> Iterator[StreamEvent]:
        self._thinking_at = None
        self._ended_calls += 1
        call = self._calls.pop(index, None)
        if call is None:  # a server that announces the call only when it is complete
            yield from whole_tool_call(item.call_id, item.name, item.arguments or "")
            return
        raw = item.arguments if item.arguments is not None else "".join(call.fragments)
        if raw and not call.fragments:
            yield ToolCallArgsDelta(id=call.id, delta=raw)
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

    def _end(self, usage: Usage | None) -> None:
        self.done = True
        if usage is not None:
            self._usage = usage

    def _completed_stop(self) -> ModelStopReason:
        if self._ended_calls:
            return "tool_use"
        if self._refused:
            return "refusal"
        return "end_turn"


def _failed(code: str | None, message: str) -> Iterator[StreamEvent]:
    """Raises `ResponseFailed` when iterated, as `on_event`'s generator does."""
    yield from ()  # a generator: nothing happens before it is iterated
    raise ResponseFailed(code, message)


def _json_usage(usage: dict[str, Any] | None) -> Usage | None:
    """The usage of a terminal event, read from its JSON as leniently as the SDK builds it."""
    if usage is None:
        return None
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    return _counted(
        usage.get("input_tokens"),
        usage.get("output_tokens"),
        details.get("cached_tokens"),
        details.get("cache_write_tokens"),
    )


def _sdk_usage(usage: ResponseUsage | None) -> Usage | None:
    if usage is None:
        return None
    # Servers other than OpenAI may leave the details out.
    details = getattr(usage, "input_tokens_details", None)
    return _counted(
        usage.input_tokens,
        usage.output_tokens,
        getattr(details, "cached_tokens", 0),
        getattr(details, "cache_write_tokens", 0),
    )


def _counted(inputs: object, outputs: object, cached: object, written: object) -> Usage:
    # `input_tokens` counts cached tokens too; `Usage` keeps the three kinds apart.
    cache_read, cache_write = _count(cached), _count(written)
    return Usage(
        input_tokens=max(0, _count(inputs) - cache_read - cache_write),
        output_tokens=_count(outputs),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _count(value: object) -> int:
    return value if type(value) is int else 0
