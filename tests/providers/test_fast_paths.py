"""The fast paths equal the full mappings, on every recorded stream and on generated
conversations.

- Stream: each mapper's `on_payload` (deltas read from the event's JSON) against its full
  mapping of the SDK-built event, event by event, on every file in `sse/` plus edge cases;
  and each provider's raw stream loop against the SDK's own typed stream feeding the full
  mapping, errors included.
- Request: the body a provider sends (built from per-message cached encodings) against the
  body the SDK's `create` sends for the same arguments, over growing conversations whose
  history is also replaced (compaction) and filled in place (a tool message).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anthropic
import anyio
import httpx
import openai
import pytest
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_support import READ_FILE, SSE, sse

from acp_agent.config import AnthropicProviderConfig, ModelConfig, OpenAIProviderConfig
from acp_agent.messages import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ResourceLinkPart,
    StreamEvent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from acp_agent.providers import ModelRequest, ProviderError, ProviderUnavailable
from acp_agent.providers._anthropic_mapping import to_params
from acp_agent.providers._anthropic_stream import EventMapper
from acp_agent.providers._error_table import Failure, error_for
from acp_agent.providers._http_client import HttpStatusError
from acp_agent.providers._message_cache import MessageCache
from acp_agent.providers._openai_chat_mapping import ChunkMapper, to_messages, to_tools
from acp_agent.providers._openai_client import AZURE_API_VERSION, error_parts
from acp_agent.providers._openai_responses_mapping import (
    REASONING_KEY_PREFIX,
    ResponseEventMapper,
    ResponseFailed,
    to_input,
)
from acp_agent.providers._openai_responses_mapping import to_tools as responses_tools
from acp_agent.providers._openai_sdk import response_event
from acp_agent.providers.anthropic import AnthropicProvider, error_message
from acp_agent.providers.base import Inputs
from acp_agent.providers.openai_chat import OpenAIChatProvider

KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
CHAT_URL = "https://api.openai.com/v1/chat/completions"
RESPONSES_URL = "https://api.openai.com/v1/responses"
MESSAGES_URL = "https://api.anthropic.com/v1/messages"
OPENAI_MODELS = (
    ModelConfig(id="gpt-4.1"),
    ModelConfig(id="o4-mini", reasoning=True),
    ModelConfig(id="gpt-5", api="responses", reasoning=True),
)
CLAUDE = "claude-sonnet-4-6"


def fixtures(*prefixes: str, exclude: tuple[str, ...] = ()) -> list[str]:
    return sorted(
        p.name
        for p in SSE.glob("*.sse")
        if p.name.startswith(prefixes) and not p.name.startswith(exclude)
    )


CHAT_FIXTURES = fixtures("", exclude=("anthropic_", "openai_responses_"))
RESPONSES_FIXTURES = fixtures("openai_responses_")
ANTHROPIC_FIXTURES = fixtures("anthropic_")


def sse_payloads(name: str) -> Iterator[tuple[str | None, Any]]:
    """(event name, decoded data) of each event of a recorded stream with JSON data."""
    for block in (SSE / name).read_text().split("\n\n"):
        event: str | None = None
        data: list[str] = []
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data and data != ["[DONE]"]:
            yield event, json.loads("\n".join(data))


class Outcome:
    """What a mapper made of a stream: its events, then the exception that ended it."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.error: str | None = None

    def run(self, step: Callable[[], Any]) -> bool:
        """Add what `step()` yields; False (and the error noted) if it raised."""
        try:
            self.events.extend(step())
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and (self.events, self.error) == (
            other.events,
            other.error,
        )

    def __repr__(self) -> str:
        return f"Outcome({self.events!r}, error={self.error!r})"


# --- stream: the mappers, event by event ------------------------------------------------------

CHAT_EDGE_CHUNKS: list[list[dict[str, Any]]] = [
    # a call, more arguments by index only, by its own id, then a new id at the same index
    [
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}
                        ]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"x"'}}]}}]},
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "a",
                                "type": "function",
                                "function": {"arguments": ":1}"},
                            }
                        ]
                    }
                }
            ]
        },
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"name": "f", "arguments": ""}}]
                    }
                }
            ]
        },
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}}
                        ]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": None}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ],
    # arguments before the name, two calls in one chunk, an unknown index
    [
        {
            "choices": [
                {"delta": {"tool_calls": [{"index": 1, "id": "c", "function": {"arguments": "{"}}]}}
            ]
        },
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"index": 1, "function": {"name": "h", "arguments": "}"}}]
                    }
                }
            ]
        },
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 1, "function": {"arguments": " "}},
                            {"index": 2, "function": {"arguments": "x"}},
                        ]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": " "}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": 3}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": "1", "function": {"arguments": "y"}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "stop"}]},
    ],
    # text with reasoning, both reasoning fields, empty strings, a refusal, odd types
    [
        {
            "choices": [
                {"delta": {"role": "assistant", "content": "", "reasoning_content": "think"}}
            ]
        },
        {"choices": [{"delta": {"content": "a", "reasoning_content": "", "reasoning": "r"}}]},
        {"choices": [{"delta": {"content": None, "reasoning": "only"}}]},
        {"choices": [{"delta": {"content": ["not", "text"]}}]},
        {"choices": [{"delta": {"content": "b", "refusal": "no"}}]},
        {"choices": [{"delta": {"content": "c", "audio": {"id": "x"}}}]},
        {"choices": [{"delta": {"content": "d"}}, {"delta": {"content": "e"}}]},
        {"choices": [], "usage": None},
        {
            "choices": [{"delta": {"content": "f"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2},
        },
        {"choices": [{"delta": {"content": "g"}, "finish_reason": "stop"}]},
    ],
]


def chat_chunk(payload: dict[str, Any]) -> Any:
    """The chunk the provider's full path maps: its JSON, decoded."""
    return json.loads(json.dumps(payload))


def chat_parity(payloads: Sequence[dict[str, Any]]) -> tuple[Outcome, Outcome, int]:
    fast_mapper, full_mapper = ChunkMapper(), ChunkMapper()
    fast, full = Outcome(), Outcome()
    taken = 0
    for payload in payloads:
        quick = fast_mapper.on_payload(json.loads(json.dumps(payload)))
        if quick is not None:
            taken += 1
            fast.events.extend(quick)
        else:
            fast.run(lambda p=payload: fast_mapper.on_chunk(chat_chunk(p)))
        full.run(lambda p=payload: full_mapper.on_chunk(chat_chunk(p)))
        assert fast_mapper.finish_reason == full_mapper.finish_reason
    fast.run(fast_mapper.finish)
    full.run(full_mapper.finish)
    return fast, full, taken


@pytest.mark.parametrize("fixture", CHAT_FIXTURES, ids=str)
def test_chat_fast_path_maps_every_recorded_chunk_exactly_as_the_full_mapping(
    fixture: str,
) -> None:
    fast, full, taken = chat_parity([payload for _, payload in sse_payloads(fixture)])

    assert fast == full
    assert taken or "invalid" in fixture  # the fast path was used, not merely skipped


@pytest.mark.parametrize("chunks", CHAT_EDGE_CHUNKS, ids=["tool-ids", "tool-odd", "deltas"])
def test_chat_fast_path_leaves_every_other_chunk_to_the_full_mapping(
    chunks: list[dict[str, Any]],
) -> None:
    fast, full, taken = chat_parity(chunks)

    assert fast == full
    assert taken


def responses_parity(payloads: Sequence[Any]) -> tuple[Outcome, Outcome, int]:
    fast_mapper, full_mapper = ResponseEventMapper(), ResponseEventMapper()
    fast, full = Outcome(), Outcome()
    taken = 0
    for payload in payloads:

        def typed(p: Any = payload) -> Any:
            return response_event(p)

        quick = fast_mapper.on_payload(payload)
        if quick is not None:
            taken += 1
            fast_ok = fast.run(lambda q=quick: q)
        else:
            fast_ok = fast.run(lambda: fast_mapper.on_event(typed()))
        full_ok = full.run(lambda: full_mapper.on_event(typed()))
        if not (fast_ok and full_ok):
            break
        assert fast_mapper.done == full_mapper.done
    else:
        fast.run(fast_mapper.finish)
        full.run(full_mapper.finish)
    return fast, full, taken


RESPONSES_EDGE_EVENTS: list[dict[str, Any]] = [
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {
            "type": "function_call",
            "id": "fc",
            "call_id": "c1",
            "name": "f",
            "arguments": "",
        },
    },
    {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{"},
    {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "lost"},
    {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": ""},
    {"type": "response.function_call_arguments.delta", "output_index": "0", "delta": "x"},
    {"type": "response.reasoning_text.delta", "output_index": 1, "content_index": 0, "delta": "r"},
    {
        "type": "response.reasoning_summary_text.delta",
        "output_index": 1,
        "summary_index": 1,
        "delta": "s",
    },
    {
        "type": "response.reasoning_summary_text.delta",
        "output_index": 1,
        "summary_index": 1,
        "delta": "",
    },
    {"type": "response.output_text.delta", "output_index": 2, "content_index": 0, "delta": "t"},
    {"type": "response.output_text.delta", "output_index": 2, "content_index": 0, "delta": 5},
    {"type": "response.refusal.delta", "output_index": 2, "content_index": 0, "delta": "no"},
    {"type": "response.audio.delta", "delta": "AAAA"},
    {
        "type": "response.completed",
        "response": {
            "id": "r",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "m",
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
    },
]


@pytest.mark.parametrize("fixture", RESPONSES_FIXTURES, ids=str)
def test_responses_fast_path_maps_every_recorded_event_exactly_as_the_full_mapping(
    fixture: str,
) -> None:
    fast, full, taken = responses_parity([payload for _, payload in sse_payloads(fixture)])

    assert fast == full
    assert taken or "failed" in fixture or "refusal" in fixture


def test_responses_fast_path_leaves_every_other_event_to_the_full_mapping() -> None:
    fast, full, taken = responses_parity(RESPONSES_EDGE_EVENTS)

    assert fast == full
    assert taken >= 6


def anthropic_parity(payloads: Sequence[Any]) -> tuple[Outcome, Outcome, int]:
    fast_mapper, full_mapper = EventMapper(), EventMapper()
    fast, full = Outcome(), Outcome()
    taken = 0
    for payload in payloads:

        def typed(p: Any = payload) -> Any:
            return p  # the full mapping reads the event's JSON too

        quick = fast_mapper.on_payload(payload)
        if quick is not None:
            taken += 1
            fast.run(lambda q=quick: q)
        else:
            fast.run(lambda: fast_mapper.on_event(typed()))
        full.run(lambda: full_mapper.on_event(typed()))
        assert fast_mapper.finished == full_mapper.finished
    fast.run(fast_mapper.finish)
    full.run(full_mapper.finish)
    return fast, full, taken


ANTHROPIC_EDGE_EVENTS: list[dict[str, Any]] = [
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": ""},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"a":'},
    },
    {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "input_json_delta", "partial_json": "lost"},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "1}"},
    },
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": 7}},
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "thinking_delta", "thinking": "hm"},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "signature_delta", "signature": "s"},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "citations_delta", "citation": {}},
    },
    {"type": "content_block_delta", "index": 1, "delta": "text"},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
    {"type": "message_stop"},
]


@pytest.mark.parametrize("fixture", ANTHROPIC_FIXTURES, ids=str)
def test_anthropic_fast_path_maps_every_recorded_event_exactly_as_the_full_mapping(
    fixture: str,
) -> None:
    payloads = [p for name, p in sse_payloads(fixture) if name not in ("ping", "error")]
    fast, full, taken = anthropic_parity(payloads)

    assert fast == full
    assert taken or "pause" in fixture or "redacted" in fixture


def test_anthropic_fast_path_leaves_every_other_event_to_the_full_mapping() -> None:
    fast, full, taken = anthropic_parity(ANTHROPIC_EDGE_EVENTS)

    assert fast == full
    assert taken >= 5


# --- stream: the providers' raw loops against the SDKs' typed streams -------------------------


def openai_provider() -> OpenAIChatProvider:
    config = OpenAIProviderConfig(type="openai", models=OPENAI_MODELS)
    return OpenAIChatProvider("openai", config, {"OPENAI_API_KEY": KEY})


def anthropic_provider(caching: bool = False) -> AnthropicProvider:
    config = AnthropicProviderConfig(
        type="anthropic", models=(ModelConfig(id=CLAUDE, reasoning=True),), prompt_caching=caching
    )
    return AnthropicProvider("anthropic", config, {"ANTHROPIC_API_KEY": KEY})


def described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def provider_outcome(provider: Any, request: ModelRequest) -> Outcome:
    outcome = Outcome()
    try:
        async with provider.stream(request) as events:
            async for event in events:
                outcome.events.append(event)
    except ProviderError as exc:
        outcome.error = described(exc)
    return outcome


def sdk_openai() -> openai.AsyncOpenAI:
    """The SDK's own client, as the providers made it before they sent requests themselves."""
    return openai.AsyncOpenAI(api_key=KEY, base_url="https://api.openai.com/v1", max_retries=0)


def sdk_anthropic() -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=KEY, base_url="https://api.anthropic.com", max_retries=0
    )


def our_error_for_openai(connection: Any, exc: openai.OpenAIError) -> ProviderError:
    """What the provider reports for what the SDK raised: the same response or event."""
    match exc:
        case openai.APIStatusError():
            return connection.translate(HttpStatusError(exc.response, exc.response.content))
        case openai.APIConnectionError():
            return connection.translate(exc.__cause__)
        case openai.APIError():
            return connection.stream_error(*error_parts(exc.body, exc.message))
    raise AssertionError(f"unexpected {exc!r}")


async def sdk_responses_outcome(provider: OpenAIChatProvider) -> Outcome:
    """What the provider made of a stream through the SDK's typed stream (before the raw
    loop): the same mapping, fed `responses.create(stream=True)` events."""
    connection = provider._connection
    outcome = Outcome()
    try:
        stream = await sdk_openai().responses.create(
            model="gpt-5", input=[{"role": "user", "content": "hi"}], stream=True, store=False
        )
        mapper = ResponseEventMapper()
        try:
            async for event in stream:
                outcome.events.extend(mapper.on_event(event))
                if mapper.done:
                    break
        finally:
            await stream.close()
        if not mapper.done:
            raise ProviderUnavailable("openai", "stream ended before the model finished")
        outcome.events.extend(mapper.finish())
    except ResponseFailed as exc:
        outcome.error = described(connection.stream_error(exc.code, exc.message))
    except openai.OpenAIError as exc:
        outcome.error = described(our_error_for_openai(connection, exc))
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        outcome.error = described(connection.translate(exc))
    except ProviderError as exc:
        outcome.error = described(exc)
    return outcome


async def sdk_anthropic_outcome(provider: AnthropicProvider) -> Outcome:
    """The same through `messages.create(stream=True)`'s typed stream."""
    outcome = Outcome()
    try:
        stream = await sdk_anthropic().messages.create(
            model=CLAUDE,
            max_tokens=1024,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        mapper = EventMapper()
        try:
            async for event in stream:
                outcome.events.extend(mapper.on_event(event.to_dict()))
        finally:
            await stream.close()
        if not mapper.finished:
            raise ProviderUnavailable("anthropic", "stream ended before the model finished")
        outcome.events.extend(mapper.finish())
    except anthropic.APIStatusError as exc:
        if exc.status_code < 400:  # an `error` event in the stream
            failure = Failure(None, exc.type, error_message(exc.body, exc.message))
            outcome.error = described(error_for(failure, provider._endpoint()))
        else:
            body = exc.response.content
            outcome.error = described(provider._translate(HttpStatusError(exc.response, body)))
    except anthropic.APIConnectionError as exc:
        outcome.error = described(provider._translate(exc.__cause__))
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        outcome.error = described(provider._translate(exc))
    except ProviderError as exc:
        outcome.error = described(exc)
    return outcome


def event(name: str | None, data: object) -> bytes:
    head = f"event: {name}\n" if name is not None else ""
    body = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {body}\n\n".encode()


def recorded(name: str, events: int | None = None) -> bytes:
    """A recorded stream, or its first `events` events."""
    data = (SSE / name).read_bytes()
    if events is None:
        return data
    return b"".join(block + b"\n\n" for block in data.split(b"\n\n")[:events])


RESPONSES_STREAMS: dict[str, bytes] = {
    **{name: recorded(name) for name in RESPONSES_FIXTURES},
    "error-member": recorded("openai_responses_text.sse", 6)
    + event(None, {"error": {"message": "Overloaded", "code": "server_error"}}),
    "error-without-message": event("error", {"error": "bad"}),
    "done-early": recorded("openai_responses_text.sse", 7) + event(None, "[DONE]"),
    "cut-off": recorded("openai_responses_text.sse", 8),
    "not-json": event("response.output_text.delta", "{oops"),
    "name-only": b"event: response.in_progress\n\n",
    "comments-and-crlf": recorded("openai_responses_text.sse")
    .replace(b"\n", b"\r\n")
    .replace(b"event: response.created", b": keep-alive\r\nid: 1\r\nevent: response.created"),
}

ANTHROPIC_STREAMS: dict[str, bytes] = {
    **{name: recorded(name) for name in ANTHROPIC_FIXTURES},
    "unnamed-events": recorded("anthropic_text.sse").replace(b"event: content_block_delta\n", b""),
    "error-not-json": recorded("anthropic_text.sse", 5)
    + b"event: error\ndata: upstream overloaded\n\n",
    "error-empty": b"event: error\n\n",
    "cut-off": recorded("anthropic_text.sse", 6),
    "not-json": event("content_block_delta", "{oops"),
    "empty-data": b"event: message_start\ndata:\n\n" + recorded("anthropic_text.sse"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("stream", sorted(RESPONSES_STREAMS), ids=str)
@respx.mock
async def test_the_responses_raw_stream_gives_what_the_sdk_stream_gave(stream: str) -> None:
    respx.post(RESPONSES_URL).mock(
        side_effect=lambda _: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=RESPONSES_STREAMS[stream]
        )
    )
    request = ModelRequest(model="gpt-5", system="", messages=[Message("user", [TextPart("hi")])])

    ours = await provider_outcome(openai_provider(), request)
    theirs = await sdk_responses_outcome(openai_provider())

    assert ours == theirs
    assert ours.events or ours.error


@pytest.mark.anyio
@pytest.mark.parametrize("stream", sorted(ANTHROPIC_STREAMS), ids=str)
@respx.mock
async def test_the_anthropic_raw_stream_gives_what_the_sdk_stream_gave(stream: str) -> None:
    respx.post(MESSAGES_URL).mock(
        side_effect=lambda _: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=ANTHROPIC_STREAMS[stream]
        )
    )
    request = ModelRequest(model=CLAUDE, system="", messages=[Message("user", [TextPart("hi")])])

    ours = await provider_outcome(anthropic_provider(), request)
    theirs = await sdk_anthropic_outcome(anthropic_provider())

    assert ours == theirs
    assert ours.events or ours.error


# --- request: the cached bodies against what the SDKs' `create` sends -------------------------

_TEXTS = st.sampled_from(["", " ", "hi", "two words ", "trailing \n", 'ünï ☃ "q" \\']) | st.text(
    max_size=12
)
_TEXT_PARTS = st.builds(TextPart, _TEXTS)
_IMAGES = st.builds(
    ImagePart,
    st.sampled_from(["iVBORw0KGgo=", "R0lGOD"]),
    st.sampled_from(["image/png", "image/gif", "image/bmp", "image/JPG"]),
)
_DOCUMENTS = st.builds(
    DocumentPart,
    st.sampled_from(["JVBERi0xLjQ=", ""]),
    st.sampled_from(["application/pdf", "text/csv"]),
    st.sampled_from(["a.pdf", "file:///w/b c.pdf"]),
)
_LINKS = st.builds(
    ResourceLinkPart,
    st.sampled_from(["file:///w/a.py#L2-3", "https://x.test/d"]),
    st.sampled_from(["a.py", "d"]),
    st.none(),
    st.none() | st.lists(_TEXT_PARTS | _IMAGES | _DOCUMENTS, max_size=2).map(tuple),
)
_REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Plan."}],
    "encrypted_content": "gAAAAB",
}
_PROVIDER_DATA = st.sampled_from(
    [
        None,
        {"signature": "sig-1"},
        {"redacted_data": "opaque"},
        {REASONING_KEY_PREFIX + "rs_1": _REASONING},
        {REASONING_KEY_PREFIX + "rs_2": {**_REASONING, "id": "rs_2", "encrypted_content": ""}},
    ]
)
_CALL_IDS = st.sampled_from(["call_1", "call_2", "toolu_3"])
_CALLS = st.builds(
    ToolCallPart,
    _CALL_IDS,
    st.sampled_from(["read_file", "grep"]),
    st.dictionaries(st.sampled_from(["path", "n"]), st.integers(0, 9) | _TEXTS, max_size=2),
)
_RESULTS = st.builds(
    ToolResultPart,
    _CALL_IDS,
    st.lists(_TEXT_PARTS | _IMAGES, max_size=2).map(tuple),
    st.booleans(),
)


def _message(role: Any, parts: st.SearchStrategy[Part]) -> st.SearchStrategy[Message]:
    return st.lists(parts, max_size=3).map(lambda found: Message(role, list(found)))


_STEPS = st.lists(
    _message("user", _TEXT_PARTS | _IMAGES | _DOCUMENTS | _LINKS)
    | _message("assistant", _TEXT_PARTS | _CALLS | st.builds(ThinkingPart, _TEXTS, _PROVIDER_DATA))
    | _message("tool", _RESULTS)
    | st.sampled_from(["compact", "fill", "resend"]),
    min_size=1,
    max_size=9,
)
_OPTIONS = st.fixed_dictionaries(
    {
        "system": st.sampled_from(["", "Be brief."]),
        "tools": st.sampled_from([(), (READ_FILE,)]),
        "max_output_tokens": st.sampled_from([None, 2048, 5000]),
        "thought_level": st.sampled_from([None, "off", "low", "high"]),
    }
)
_GROWING = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def conversations(steps: Sequence[Message | str]) -> Iterator[list[Message]]:
    """The history before each request: messages appended, now and then compacted (a new
    summary replaces all but the last two), filled in place (one more result in the last
    tool message) or sent again unchanged."""
    history: list[Message] = []
    for step in steps:
        match step:
            case Message():
                history.append(step)
            case "compact":
                history[:] = [Message("user", [TextPart("Summary so far.")]), *history[-2:]]
            case "fill" if history and history[-1].role == "tool":
                history[-1].parts.append(ToolResultPart("call_2", (TextPart("more"),)))
            case _:
                pass
        if history:
            yield list(history)


def sent_json(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


async def drain(provider: Any, request: ModelRequest) -> None:
    async with provider.stream(request) as events:
        async for _ in events:
            pass


@given(steps=_STEPS, options=_OPTIONS, model=st.sampled_from(["gpt-4.1", "o4-mini"]))
@_GROWING
def test_chat_requests_are_the_json_the_sdk_would_send(
    steps: list[Message | str], options: dict[str, Any], model: str
) -> None:
    from acp_agent.providers.openai_chat import _reasoning_effort

    async def check() -> None:
        provider = openai_provider()
        connection = provider._connection
        route = respx.post(CHAT_URL).mock(side_effect=lambda _: sse("openai_text.sse"))
        for history in conversations(steps):
            request = ModelRequest(model=model, messages=history, **options)
            await drain(provider, request)
            ours = sent_json(route)
            limit, effort = request.max_output_tokens, _reasoning_effort(connection, request)
            async with sdk_openai().chat.completions.with_streaming_response.create(
                model=model,
                messages=to_messages(request.system, history),
                tools=to_tools(request.tools) if request.tools else openai.omit,
                stream=True,
                stream_options={"include_usage": True},
                max_completion_tokens=limit if limit is not None else openai.omit,
                reasoning_effort=effort if effort is not None else openai.omit,
            ):
                pass
            assert ours == sent_json(route)

    with respx.mock:
        anyio.run(check)


@given(steps=_STEPS, options=_OPTIONS)
@_GROWING
def test_responses_requests_are_the_json_the_sdk_would_send(
    steps: list[Message | str], options: dict[str, Any]
) -> None:
    async def check() -> None:
        provider = openai_provider()
        client = sdk_openai()
        route = respx.post(RESPONSES_URL).mock(
            side_effect=lambda _: sse("openai_responses_text.sse")
        )
        for history in conversations(steps):
            request = ModelRequest(model="gpt-5", messages=history, **options)
            await drain(provider, request)
            ours = sent_json(route)
            level = request.thought_level
            async with client.responses.with_streaming_response.create(
                model="gpt-5",
                input=to_input(history),
                instructions=request.system or openai.omit,
                tools=responses_tools(request.tools) if request.tools else openai.omit,
                stream=True,
                store=False,
                include=["reasoning.encrypted_content"],
                reasoning=(
                    {"effort": level, "summary": "auto"}
                    if level is not None and level != "off"
                    else openai.omit
                ),
                max_output_tokens=request.max_output_tokens or openai.omit,
            ):
                pass
            assert ours == sent_json(route)

    with respx.mock:
        anyio.run(check)


@given(steps=_STEPS, options=_OPTIONS, caching=st.booleans())
@_GROWING
def test_anthropic_requests_are_the_json_the_sdk_would_send(
    steps: list[Message | str], options: dict[str, Any], caching: bool
) -> None:
    async def check() -> None:
        provider = anthropic_provider(caching)
        route = respx.post(MESSAGES_URL).mock(side_effect=lambda _: sse("anthropic_text.sse"))
        for history in conversations(steps):
            request = ModelRequest(model=CLAUDE, messages=history, **options)
            await drain(provider, request)
            ours = sent_json(route)
            params = to_params(request, caching=caching)  # every message converted afresh
            # Bedrock and Vertex get the arguments, from the cached blocks: the same.
            blocks = provider._blocks.values(history, Inputs())
            assert to_params(request, caching=caching, blocks=blocks) == params
            async with sdk_anthropic().messages.with_streaming_response.create(
                model=CLAUDE,
                max_tokens=params.max_tokens,
                messages=params.messages,
                system=params.system or anthropic.omit,
                tools=params.tools or anthropic.omit,
                thinking=params.thinking or anthropic.omit,
                stream=True,
            ):
                pass
            assert ours == sent_json(route)

    with respx.mock:
        anyio.run(check)


@pytest.mark.anyio
@respx.mock
async def test_azure_chat_bodies_go_to_the_deployment_the_sdk_would_call() -> None:
    config = OpenAIProviderConfig(
        type="azure-openai",
        base_url="https://example.openai.azure.com",
        models=(ModelConfig(id="my gpt/4.1"),),
    )
    provider = OpenAIChatProvider("azure", config, {"AZURE_OPENAI_API_KEY": KEY})
    route = respx.post(url__regex=r"https://example\.openai\.azure\.com/.*").mock(
        side_effect=lambda _: sse("openai_text.sse")
    )
    history = [Message("user", [TextPart("hi")])]

    await drain(provider, ModelRequest(model="my gpt/4.1", system="", messages=history))
    ours = route.calls.last.request
    azure = openai.AsyncAzureOpenAI(
        azure_endpoint="https://example.openai.azure.com",
        api_version=AZURE_API_VERSION,
        api_key=KEY,
        max_retries=0,
    )
    async with azure.chat.completions.with_streaming_response.create(
        model="my gpt/4.1", messages=to_messages("", history), stream=True
    ):
        pass
    theirs = route.calls.last.request

    assert ours.url == theirs.url
    assert "/deployments/my%20gpt%2F4.1/chat/completions" in str(ours.url)
    assert ours.headers["api-key"] == theirs.headers["api-key"] == KEY


# --- the cache itself -------------------------------------------------------------------------


def test_a_message_is_converted_once_while_it_stays_the_same() -> None:
    converted: list[Message] = []
    cache: MessageCache[int] = MessageCache(lambda m: converted.append(m) or len(converted))
    first, second = Message("user", [TextPart("a")]), Message("assistant", [TextPart("b")])

    assert cache.values([first]) == [1]
    assert cache.values([first, second]) == [1, 2]
    assert cache.values([first, second]) == [1, 2]
    assert converted == [first, second]


def test_a_message_whose_parts_changed_is_converted_again() -> None:
    cache: MessageCache[str] = MessageCache(lambda m: "".join(p.text for p in m.parts))  # type: ignore[union-attr]
    tool = Message("tool", [TextPart("one")])
    assert cache.values([tool]) == ["one"]

    tool.parts.append(TextPart("two"))  # a tool message filling up
    assert cache.values([tool]) == ["onetwo"]
    tool.parts[-1] = TextPart("three")  # the last part replaced
    assert cache.values([tool]) == ["onethree"]
    tool.parts = [TextPart("new")]  # replaced whole
    assert cache.values([tool]) == ["new"]


def test_equal_but_distinct_messages_are_not_taken_for_each_other() -> None:
    calls: list[Message] = []
    cache: MessageCache[int] = MessageCache(lambda m: calls.append(m) or len(calls))
    a, b = Message("user", [TextPart("same")]), Message("user", [TextPart("same")])

    assert cache.values([a, b]) == [1, 2]


def test_entries_no_request_used_for_a_while_are_dropped() -> None:
    cache: MessageCache[int] = MessageCache(lambda m: 0, keep=4)
    old = Message("user", [TextPart("old")])
    cache.values([old])
    live = Message("user", [TextPart("live")])

    for _ in range(40):
        cache.values([live])

    assert len(cache) == 1


def test_a_failed_conversion_is_raised_and_not_remembered() -> None:
    def convert(message: Message) -> int:
        if isinstance(message.parts[0], ImagePart):
            raise ValueError("no images here")
        return 1

    cache: MessageCache[int] = MessageCache(convert)
    with pytest.raises(ValueError, match="no images"):
        cache.values([Message("user", [ImagePart("x", "image/png")])])
    assert len(cache) == 0
