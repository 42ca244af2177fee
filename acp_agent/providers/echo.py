"""The offline provider: echoes the prompt back, and scripts tool calls and stops on request.

It lets the whole agent run (and be tested end to end) without a network or an API key.
Lines of the last user message that are directives, removed from the echoed text:

    @tool NAME {"json": "object"}   call tool NAME with these arguments (one call per line)
    @stop max_tokens | refusal      end the reply with this stop reason
    @slow SECONDS                   pause between streamed chunks (to cancel mid-stream)

After tool results it reports what each tool returned, so a scripted call completes a turn.
A mention echoes as its link, and what was read for it follows the echo (directives in it
are not obeyed: they are file contents, not the user's words).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from ..messages import (
    DocumentPart,
    ImagePart,
    Message,
    ModelStopReason,
    Part,
    ResourceLinkPart,
    Stop,
    StreamEvent,
    TextDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ._tool_calls import whole_tool_call
from .base import ModelRequest
from .errors import ProviderError

if TYPE_CHECKING:
    from ..config import EchoProviderConfig

_TOOL_LINE = re.compile(r"@tool\s+(?P<name>[\w.\-]+)\s*(?P<args>\{.*\})?")
_STOP_LINE = re.compile(r"@stop\s+(?P<reason>max_tokens|refusal)")
_SLOW_LINE = re.compile(r"@slow\s+(?P<seconds>\d+(?:\.\d+)?)")
_CHUNK = re.compile(r"\s*\S+\s*")
_RESULT_LINES = 20


@dataclass
class _Script:
    """What the directive lines of one user message ask for."""

    text: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    """(name, raw JSON object text) per `@tool` line."""
    stop: ModelStopReason = "end_turn"
    delay: float | None = None


class EchoProvider:
    def __init__(self, name: str, config: EchoProviderConfig) -> None:
        self.name = name
        self._config = config

    async def aclose(self) -> None:
        pass  # no connections

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        # Leaving the block closes the generator, wherever the reply was left unread.
        return aclosing(self._events(request))

    async def _events(self, request: ModelRequest) -> AsyncGenerator[StreamEvent]:
        if not request.messages:
            raise ProviderError(self.name, "the conversation is empty")
        last = request.messages[-1]
        match last.role:
            case "user":
                script = _parse_script(last)
            case "tool":
                script = _Script(text=_describe_results(last, request.messages))
            case "assistant":
                raise ProviderError(self.name, "the conversation must end with a user message")

        delay = self._config.chunk_delay if script.delay is None else script.delay
        reply_chars = 0
        if script.tool_calls:
            first_id = _count_tool_calls(request.messages) + 1
            for number, (name, raw) in enumerate(script.tool_calls, start=first_id):
                # A checkpoint before every event keeps the stream cancellable even at delay 0.
                await anyio.sleep(delay if number > first_id else 0)
                for event in whole_tool_call(f"echo-call-{number}", name, raw):
                    yield event
                reply_chars += len(name) + len(raw)
            stop: ModelStopReason = "tool_use"
        else:
            for index, chunk in enumerate(_chunks(script.text)):
                await anyio.sleep(delay if index else 0)
                yield TextDelta(chunk)
            reply_chars = len(script.text)
            stop = script.stop

        yield Usage(
            input_tokens=_tokens(_conversation_chars(request)),
            output_tokens=_tokens(reply_chars),
        )
        yield Stop(stop)


def _parse_script(message: Message) -> _Script:
    script = _Script()
    pieces: list[str] = []
    read: list[str] = []
    for part in message.parts:
        match part:
            case TextPart(text=text):
                kept = [line for line in text.splitlines() if not _apply_directive(line, script)]
                pieces.append("\n".join(kept).strip())
            case ImagePart() | DocumentPart():
                pieces.append(_describe(part))
            case ResourceLinkPart(context=context):
                pieces.append(part.link)
                read.extend(_describe(item) for item in context or ())
            case _:
                continue  # echo is forgiving: nothing else in a user message is worth echoing
    body = "\n".join(piece for piece in [*pieces, *read] if piece)
    script.text = f"Echo: {body}" if body else "Echo: (empty message)"
    return script


def _describe(part: TextPart | ImagePart | DocumentPart) -> str:
    match part:
        case TextPart(text=text):
            return text
        case ImagePart(mime_type=mime_type):
            return f"[image: {mime_type}]"
        case DocumentPart(mime_type=mime_type, name=name):
            return f"[document: {name} ({mime_type})]"


def _apply_directive(line: str, script: _Script) -> bool:
    """Record the directive on `line`, if it is one; a malformed one stays in the echo."""
    line = line.strip()
    if match := _TOOL_LINE.fullmatch(line):
        raw = match["args"] or "{}"
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError:
            return False
        if not isinstance(arguments, dict):
            return False
        script.tool_calls.append((match["name"], raw))
        return True
    if match := _STOP_LINE.fullmatch(line):
        script.stop = "max_tokens" if match["reason"] == "max_tokens" else "refusal"
        return True
    if match := _SLOW_LINE.fullmatch(line):
        script.delay = float(match["seconds"])
        return True
    return False


def _describe_results(message: Message, history: Sequence[Message]) -> str:
    names = {call.id: call.name for earlier in history for call in earlier.tool_calls}
    reports = []
    for part in message.parts:
        if not isinstance(part, ToolResultPart):
            continue
        name = names.get(part.tool_call_id, f"(unknown call {part.tool_call_id})")
        text = _result_text(part)
        if part.is_error:
            reports.append(f"Tool {name} failed: {text}")
            continue
        lines = text.splitlines()
        shown = "\n".join(lines[:_RESULT_LINES])
        if len(lines) > _RESULT_LINES:
            shown += f"\n... ({len(lines) - _RESULT_LINES} more lines)"
        reports.append(f"Tool {name} returned:\n{shown}")
    return "\n\n".join(reports) or "Echo: (no tool results)"


def _result_text(result: ToolResultPart) -> str:
    return "\n".join(
        part.text if isinstance(part, TextPart) else f"[image: {part.mime_type}]"
        for part in result.content
    )


def _chunks(text: str) -> Iterator[str]:
    """Word by word, each word with the whitespace after it, so the chunks join to `text`."""
    return (match.group() for match in _CHUNK.finditer(text))


def _count_tool_calls(history: Sequence[Message]) -> int:
    return sum(len(message.tool_calls) for message in history)


def _conversation_chars(request: ModelRequest) -> int:
    return len(request.system) + sum(
        _part_chars(part) for message in request.messages for part in message.parts
    )


def _part_chars(part: Part) -> int:
    match part:
        case TextPart(text=text) | ThinkingPart(text=text):
            return len(text)
        case ImagePart() | DocumentPart():
            return len(_describe(part))
        case ResourceLinkPart(context=context):
            return len(part.link) + sum(len(_describe(item)) for item in context or ())
        case ToolCallPart(name=name, arguments=arguments):
            return len(name) + len(json.dumps(arguments))
        case ToolResultPart():
            return len(_result_text(part))


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)
