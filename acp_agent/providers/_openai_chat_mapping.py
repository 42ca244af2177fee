"""Neutral conversation -> Chat Completions request, and stream chunks -> neutral events.

Pure functions and one small state machine, no I/O. `to_messages` is the request mapping;
the provider sends what `encode_message` makes of each message (the same, serialised, and
cached per message). The stream mapping reads each chunk's decoded JSON (the SDK's types
serve as annotations only, so `openai` is never imported): `ChunkMapper.on_payload` takes
the common plain deltas in one quick look, `on_chunk` every chunk (parity tests prove both
give the same events). Server differences handled here:
reasoning arrives as `reasoning_content` (DeepSeek, older vLLM) or `reasoning` (Ollama,
OpenRouter, newer vLLM); Ollama ends tool calls with finish_reason "stop"; Azure opens with
a chunk without choices; some servers put usage on the finishing chunk instead of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
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
from ._tool_calls import parse_tool_arguments
from ._wire import dumps
from .base import UnsupportedPart

if TYPE_CHECKING:
    # Annotations only: the SDK is not imported (its import costs a second).
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionContentPartImageParam,
        ChatCompletionContentPartParam,
        ChatCompletionContentPartTextParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
        ChatCompletionToolMessageParam,
        ChatCompletionUserMessageParam,
    )
    from openai.types.chat.chat_completion_content_part_param import File


_REASONING_FIELDS = ("reasoning_content", "reasoning")
_STOP_REASONS: dict[str, ModelStopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


# --- request ------------------------------------------------------------------------------


def to_messages(system: str, messages: Sequence[Message]) -> list[ChatCompletionMessageParam]:
    result = system_messages(system)
    for message in messages:
        result.extend(message_params(message))
    return result


def system_messages(system: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "system", "content": system}] if system else []


def message_params(message: Message) -> list[ChatCompletionMessageParam]:
    """The API messages one neutral message becomes (a tool message: one per result)."""
    match message.role:
        case "user":
            return [_user_message(message.parts)]
        case "assistant":
            return [_assistant_message(message.parts)]
        case "tool":
            return [_tool_message(part) for part in message.parts] + _tool_images(message.parts)
        case _:
            assert_never(message.role)


def encode_message(message: Message) -> bytes:
    """`message_params(message)` as JSON list items (comma-separated, no brackets)."""
    return b",".join(dumps(param) for param in message_params(message))


def to_tools(tools: Iterable[ToolSpec]) -> list[ChatCompletionFunctionToolParam]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def _user_message(parts: Sequence[Part]) -> ChatCompletionUserMessageParam:
    content = [_user_content(part) for part in model_parts(parts)]
    if all(item["type"] == "text" for item in content):
        # A plain string: older OpenAI-compatible servers reject content arrays for text.
        return {"role": "user", "content": "\n".join(_texts(content))}
    return {"role": "user", "content": content}


def _user_content(part: Part) -> ChatCompletionContentPartParam:
    match part:
        case TextPart():
            return _text_content(part)
        case ImagePart():
            return _image_content(part)
        case DocumentPart():
            return _file_content(part)
    raise UnsupportedPart(f"a user message cannot carry {type(part).__name__}")


def _text_content(part: TextPart) -> ChatCompletionContentPartTextParam:
    return {"type": "text", "text": part.text}


def _image_content(part: ImagePart) -> ChatCompletionContentPartImageParam:
    return {"type": "image_url", "image_url": {"url": data_url(part)}}


def _file_content(part: DocumentPart) -> File:
    return {
        "type": "file",
        "file": {
            "filename": file_name(part),
            "file_data": data_url(part),
        },
    }


def data_url(part: ImagePart | DocumentPart) -> str:
    """The part's bytes inline, as both OpenAI APIs take images and files."""
    return f"data:{part.mime_type};base64,{part.data}"


def file_name(part: DocumentPart) -> str:
    """The document's file name, as the OpenAI APIs want one with the data."""
    return PurePosixPath(part.name).name or "document"


def _texts(content: Iterable[ChatCompletionContentPartParam]) -> Iterator[str]:
    return (item["text"] for item in content if item["type"] == "text")


def _assistant_message(parts: Sequence[Part]) -> ChatCompletionAssistantMessageParam:
    texts: list[str] = []
    calls: list[ChatCompletionMessageFunctionToolCallParam] = []
    for part in parts:
        match part:
            case TextPart():
                texts.append(part.text)
            case ToolCallPart():
                calls.append(_tool_call(part))
            case ThinkingPart():
                continue  # Chat Completions has no field to send reasoning back
            case _:
                raise UnsupportedPart(f"an assistant message cannot carry {type(part).__name__}")
    message: ChatCompletionAssistantMessageParam = {
        "role": "assistant",
        "content": "".join(texts) or None,
    }
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_call(part: ToolCallPart) -> ChatCompletionMessageFunctionToolCallParam:
    return {
        "id": part.id,
        "type": "function",
        "function": {"name": part.name, "arguments": json.dumps(part.arguments)},
    }


def _tool_message(part: Part) -> ChatCompletionToolMessageParam:
    if not isinstance(part, ToolResultPart):
        raise UnsupportedPart(f"a tool message cannot carry {type(part).__name__}")
    # Tool messages carry text only: each image follows in a user message (`_tool_images`).
    text = "\n".join(
        item.text if isinstance(item, TextPart) else f"[image ({item.mime_type}): {_FOLLOWS}]"
        for item in part.content
    )
    if part.is_error:
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": part.tool_call_id, "content": text or "(no output)"}


_FOLLOWS = "in the user message after the tool results"


def _tool_images(parts: Sequence[Part]) -> list[ChatCompletionMessageParam]:
    """The images the tool results hold, as one user message after them (Chat Completions
    tool messages take text only; user messages take images), each run of them labelled
    with its call; no message when the results hold no image."""
    content: list[ChatCompletionContentPartParam] = []
    for part in parts:
        if not isinstance(part, ToolResultPart):
            continue
        images = [item for item in part.content if isinstance(item, ImagePart)]
        if images:
            content.append(_text_content(TextPart(f"[tool call {part.tool_call_id} returned:]")))
            content.extend(_image_content(image) for image in images)
    if not content:
        return []
    return [{"role": "user", "content": content}]


# --- stream -------------------------------------------------------------------------------


@dataclass
class _PendingCall:
    id: str
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    started: bool = False


class ChunkMapper:
    """Turns chunks into events as they arrive; `finish` closes tool calls and reports the stop."""

    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self._calls: list[_PendingCall] = []
        self._by_index: dict[int, _PendingCall] = {}
        self._usage: Usage | None = None
        self._refused = False

    def on_payload(self, payload: Any) -> list[StreamEvent] | None:
        """The events of a chunk that carries one plain delta, read from its decoded JSON:
        text, reasoning, or more arguments of a tool call under way; None for any other
        chunk (usage, a finish reason, a refusal, a new call ...), which `on_chunk` maps.

        Nearly every chunk of a reply is such a delta; reading it straight from the JSON
        skips walking the chunk member by member, the main cost of relaying a fast stream.
        """
        try:
            if payload.get("usage") is not None:
                return None
            (choice,) = payload["choices"]
            if choice.get("finish_reason") is not None:
                return None
            delta = choice["delta"]
            fields = delta.items()
        except (AttributeError, KeyError, TypeError, ValueError):
            return None
        text: str | None = None
        tool_deltas: list[Any] = []
        for key, value in fields:
            if value is None or key == "role":
                continue
            if type(value) is str and (key == "content" or key in _REASONING_FIELDS):
                if key == "content":
                    text = value
            elif key == "tool_calls" and type(value) is list:
                tool_deltas = value
            else:
                return None  # a refusal, a function_call, audio ...: the full mapping
        calls = [self._continued_call(tool_delta) for tool_delta in tool_deltas]
        if None in calls:
            return None
        events: list[StreamEvent] = []
        reasoning = next((v for k in _REASONING_FIELDS if (v := delta.get(k))), None)
        if reasoning:
            events.append(ThinkingDelta(reasoning))
        if text:
            events.append(TextDelta(text))
        for call, tool_delta in zip(calls, tool_deltas, strict=True):
            fragment = tool_delta["function"].get("arguments")
            if fragment and call is not None:
                call.fragments.append(fragment)
                events.append(ToolCallArgsDelta(id=call.id, delta=fragment))
        return events

    def _continued_call(self, tool_delta: Any) -> _PendingCall | None:
        """The started call `tool_delta` adds arguments to, if that is all it does."""
        if type(tool_delta) is not dict or type(index := tool_delta.get("index")) is not int:
            return None
        call = self._by_index.get(index)
        function = tool_delta.get("function")
        if call is None or not call.started or type(function) is not dict:
            return None
        if tool_delta.get("id") and tool_delta["id"] != call.id:
            return None  # a new call at a known index
        arguments = function.get("arguments")
        if arguments is not None and type(arguments) is not str:
            return None
        if function.get("name") is not None and type(function["name"]) is not str:
            return None
        return call

    def on_chunk(self, chunk: Any) -> Iterator[StreamEvent]:
        """The events of any chunk (its decoded JSON), read leniently: a member of the wrong
        type counts as absent, as in the SDK's lenient build of a loose chunk."""
        if not isinstance(chunk, dict):
            return
        if isinstance(usage := chunk.get("usage"), dict):
            self._usage = _usage(usage)
        for choice in _list(chunk.get("choices")):
            if not isinstance(choice, dict):
                continue
            if isinstance(delta := choice.get("delta"), dict):
                yield from self._on_delta(delta)
            if reason := _text(choice.get("finish_reason")):
                self.finish_reason = reason

    def finish(self) -> Iterator[StreamEvent]:
        for call in self._calls:
            if not call.started:
                yield ToolCallStart(id=call.id, name=call.name)
            arguments = parse_tool_arguments("".join(call.fragments))
            yield ToolCallEnd(ToolCallPart(id=call.id, name=call.name, arguments=arguments))
        if self._usage is not None:
            yield self._usage
        yield Stop(self._stop_reason())

    def _on_delta(self, delta: dict[str, Any]) -> Iterator[StreamEvent]:
        if reasoning := _reasoning(delta):
            yield ThinkingDelta(reasoning)
        if content := _text(delta.get("content")):
            yield TextDelta(content)
        if refusal := _text(delta.get("refusal")):
            self._refused = True
            yield TextDelta(refusal)
        for tool_delta in _list(delta.get("tool_calls")):
            if isinstance(tool_delta, dict):
                yield from self._on_tool_delta(tool_delta)

    def _on_tool_delta(self, delta: dict[str, Any]) -> Iterator[StreamEvent]:
        index = delta.get("index")
        index = index if type(index) is int else 0  # a server that numbers nothing
        call_id = _text(delta.get("id"))
        call = self._by_index.get(index)
        # A new id at a known index is a new call: some servers number every call 0.
        if call is None or (call_id and call_id != call.id):
            call = _PendingCall(id=call_id or f"call_{len(self._calls) + 1}")
            self._calls.append(call)
            self._by_index[index] = call
        function = delta.get("function")
        function = function if isinstance(function, dict) else {}
        fragment = _text(function.get("arguments"))
        if fragment:
            call.fragments.append(fragment)
        if call.started:
            if fragment:
                yield ToolCallArgsDelta(id=call.id, delta=fragment)
            return
        if name := _text(function.get("name")):
            call.name = name
            call.started = True
            yield ToolCallStart(id=call.id, name=call.name)
            if call.fragments:
                yield ToolCallArgsDelta(id=call.id, delta="".join(call.fragments))

    def _stop_reason(self) -> ModelStopReason:
        if self.finish_reason == "length":
            return "max_tokens"  # even with tool calls: their arguments may be cut off
        if self._calls:
            return "tool_use"
        if self._refused:
            return "refusal"
        reason = _STOP_REASONS.get(self.finish_reason or "", "end_turn")
        # "tool_calls" without a single call would leave the engine nothing to run.
        return "end_turn" if reason == "tool_use" else reason


def _reasoning(delta: dict[str, Any]) -> str | None:
    for name in _REASONING_FIELDS:
        if value := _text(delta.get(name)):
            return value
    return None


def _usage(usage: dict[str, Any]) -> Usage:
    # `prompt_tokens` counts cached tokens too; `Usage` keeps the three kinds apart.
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached = _count(details.get("cached_tokens"))
    written = _count(details.get("cache_write_tokens"))
    return Usage(
        input_tokens=max(0, _count(usage.get("prompt_tokens")) - cached - written),
        output_tokens=_count(usage.get("completion_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int:
    return value if type(value) is int else 0


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
