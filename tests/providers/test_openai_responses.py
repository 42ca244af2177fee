"""The Responses API (models with `api = "responses"`) against respx mocks replaying SSE streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import httpx
import pytest
import respx
from provider_support import READ_FILE, collect, sent_body, sse, sse_events

from acp_agent.config import ModelConfig, OpenAIProviderConfig
from acp_agent.messages import (
    ImagePart,
    Message,
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
    Usage,
)
from acp_agent.providers import (
    ContextWindowError,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
)
from acp_agent.providers.openai_chat import OpenAIChatProvider

pytestmark = pytest.mark.anyio

RESPONSES_URL = "https://api.openai.com/v1/responses"
CHAT_URL = "https://api.openai.com/v1/chat/completions"
KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
MODELS = (
    ModelConfig(id="gpt-4.1", api="responses"),
    ModelConfig(id="o4-mini", api="responses", reasoning=True),
    ModelConfig(id="gpt-4.1-mini"),
)
HELLO = [Message("user", [TextPart("hi")])]
TOOLS = (READ_FILE,)
ENCRYPTED = (
    "gAAAAABosfG1Xk3vQ9bYw2LrT8sV0nE4bZcQm2HkYx0pLrVdT8sW1nE4bZc-7fTz1LqWm3XvN0yR5bKc7dHs"
    "2sGh6PjVx9QeT4nM1wZk8aLr_Q3kv9x1deJ5uFaWq9xTn2LrC7dYh0vJ5uFa=="
)
REASONING_ID = "rs_68b1f1b5a6b78190d8b0e2f4a5b6c7d8"


def make_provider(**config: Any) -> OpenAIChatProvider:
    settings: dict[str, Any] = {"type": "openai", "models": MODELS}
    settings.update(config)
    return OpenAIChatProvider("openai", OpenAIProviderConfig(**settings), {"OPENAI_API_KEY": KEY})


def request(
    messages: Sequence[Message] = HELLO, model: str = "gpt-4.1", **fields: Any
) -> ModelRequest:
    return ModelRequest(model=model, system=fields.pop("system", ""), messages=messages, **fields)


def event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


class ChunkedStream(httpx.AsyncByteStream):
    def __init__(self, events: Sequence[bytes]) -> None:
        self.events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for item in self.events:
            yield item
        await anyio.lowlevel.checkpoint()


def stream_of(events: Sequence[bytes]) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=ChunkedStream(events)
    )


def reply_from(events: Sequence[StreamEvent]) -> Message:
    """The assistant message the engine keeps: text and thinking merged, tool calls last."""
    parts: list[Part] = []
    calls: list[Part] = []
    for item in events:
        match item:
            case TextDelta(text=text):
                if parts and isinstance(parts[-1], TextPart):
                    parts[-1] = TextPart(parts[-1].text + text)
                else:
                    parts.append(TextPart(text))
            case ThinkingDelta(text=text, provider_data=data):
                if parts and isinstance(parts[-1], ThinkingPart):
                    last = parts[-1]
                    merged = {**(last.provider_data or {}), **(data or {})} or None
                    parts[-1] = ThinkingPart(last.text + text, merged)
                else:
                    parts.append(ThinkingPart(text, data))
            case ToolCallEnd(call=call):
                calls.append(call)
    return Message("assistant", parts + calls)


# --- stream mapping -----------------------------------------------------------------------


@respx.mock
async def test_output_text_streams_as_text_deltas_then_usage_split_by_cache_and_end_turn() -> None:
    route = respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_text.sse"))

    events = await collect(make_provider(), request(system="You are a coding agent."))

    words = ["Hello", "!", " The", " file", " defines", " two", " functions", "."]
    assert events == [
        *(TextDelta(word) for word in words),
        Usage(input_tokens=180, output_tokens=9, cache_read_tokens=1024),
        Stop("end_turn"),
    ]
    body = sent_body(route)
    assert body["model"] == "gpt-4.1"
    assert body["instructions"] == "You are a coding agent."
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    assert body["stream"] is True
    assert body["store"] is False
    # gpt-4.1 is no reasoning model: asking for encrypted reasoning would be a 400.
    assert not {"include", "reasoning", "tools", "max_output_tokens"} & body.keys()


@respx.mock
async def test_reasoning_summary_is_thinking_and_the_function_call_streams_by_call_id() -> None:
    respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_reasoning_tool_call.sse"))

    events = await collect(make_provider(), request(model="o4-mini", thought_level="medium"))

    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    assert "".join(e.text for e in thinking) == (
        "**Finding the entry point**\n\nThe user asks what the app does."
        "\n\n**Reading the file**\n\nI should read src/app.py first."
    )
    assert thinking[-1] == ThinkingDelta(
        "",
        provider_data={
            f"openai_reasoning:{REASONING_ID}": {
                "type": "reasoning",
                "id": REASONING_ID,
                "summary": [
                    {
                        "type": "summary_text",
                        "text": "**Finding the entry point**\n\nThe user asks what the app does.",
                    },
                    {
                        "type": "summary_text",
                        "text": "**Reading the file**\n\nI should read src/app.py first.",
                    },
                ],
                "encrypted_content": ENCRYPTED,
            }
        },
    )
    call_id = "call_Qm2HkYx0pLrVdT8sW1nE4bZc"
    rest = [e for e in events if not isinstance(e, ThinkingDelta)]
    assert rest[0] == ToolCallStart(call_id, "read_file")
    fragments = [e.delta for e in rest if isinstance(e, ToolCallArgsDelta)]
    assert "".join(fragments) == '{"path":"src/app.py"}'
    assert len(fragments) == 7
    assert rest[-3:] == [
        ToolCallEnd(ToolCallPart(call_id, "read_file", {"path": "src/app.py"})),
        Usage(input_tokens=412, output_tokens=186),
        Stop("tool_use"),
    ]


@respx.mock
async def test_the_encrypted_reasoning_item_goes_back_in_the_next_request_before_its_call() -> None:
    route = respx.post(RESPONSES_URL).mock(
        side_effect=[
            sse("openai_responses_reasoning_tool_call.sse"),
            sse("openai_responses_text.sse"),
        ]
    )
    provider = make_provider()
    history = [Message("user", [TextPart("What does the app do?")])]

    first = await collect(provider, request(history, "o4-mini", thought_level="high", tools=TOOLS))
    history.append(reply_from(first))
    call_id = "call_Qm2HkYx0pLrVdT8sW1nE4bZc"
    history.append(Message("tool", [ToolResultPart(call_id, (TextPart("print('hi')"),))]))
    await collect(provider, request(history, "o4-mini", thought_level="high", tools=TOOLS))

    body = sent_body(route)
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "What does the app do?"}]},
        {
            "type": "reasoning",
            "id": REASONING_ID,
            "summary": [
                {
                    "type": "summary_text",
                    "text": "**Finding the entry point**\n\nThe user asks what the app does.",
                },
                {
                    "type": "summary_text",
                    "text": "**Reading the file**\n\nI should read src/app.py first.",
                },
            ],
            "encrypted_content": ENCRYPTED,
        },
        {
            "type": "function_call",
            "call_id": call_id,
            "name": "read_file",
            "arguments": '{"path": "src/app.py"}',
        },
        {"type": "function_call_output", "call_id": call_id, "output": "print('hi')"},
    ]
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["store"] is False
    assert body["tools"] == [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a text file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            "strict": False,
        }
    ]


@respx.mock
async def test_parallel_function_calls_keep_their_own_call_ids_and_arguments() -> None:
    respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_parallel_tool_calls.sse"))

    events = await collect(make_provider(), request())

    first, second = "call_8fTz1LqWm3XvN0yR5bKc7dHs", "call_2sGh6PjVx9QeT4nM1wZk8aLr"
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts == [ToolCallStart(first, "read_file"), ToolCallStart(second, "grep")]
    args = {
        call: "".join(e.delta for e in events if isinstance(e, ToolCallArgsDelta) and e.id == call)
        for call in (first, second)
    }
    assert args == {first: '{"path": "README.md"}', second: '{"pattern": "TODO", "path": "src"}'}
    assert [e for e in events if isinstance(e, ToolCallEnd)] == [
        ToolCallEnd(ToolCallPart(first, "read_file", {"path": "README.md"})),
        ToolCallEnd(ToolCallPart(second, "grep", {"pattern": "TODO", "path": "src"})),
    ]
    assert events[-2:] == [Usage(input_tokens=520, output_tokens=47), Stop("tool_use")]


@respx.mock
async def test_incomplete_for_max_output_tokens_stops_with_max_tokens() -> None:
    route = respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_incomplete.sse"))

    events = await collect(make_provider(), request(max_output_tokens=5))

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Once upon a time,"
    assert events[-2:] == [Usage(input_tokens=38, output_tokens=5), Stop("max_tokens")]
    assert sent_body(route)["max_output_tokens"] == 5


@respx.mock
async def test_a_refusal_streams_as_text_and_stops_with_refusal() -> None:
    respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_refusal.sse"))

    events = await collect(make_provider(), request())

    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "I'm sorry, but I can't help with that."
    assert events[-1] == Stop("refusal")


@respx.mock
async def test_incomplete_for_content_filter_stops_with_refusal() -> None:
    respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_content_filter.sse"))

    events = await collect(make_provider(), request())

    assert events == [
        TextDelta("The"),
        TextDelta(" scene"),
        TextDelta(" shows"),
        Usage(input_tokens=96, output_tokens=3),
        Stop("refusal"),
    ]


# --- request ------------------------------------------------------------------------------


@respx.mock
async def test_images_go_as_input_image_data_urls_and_tool_results_keep_theirs() -> None:
    route = respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_text.sse"))
    messages = [
        Message("user", [TextPart("What is this?"), ImagePart("iVBORw0KGgo=", "image/png")]),
        Message(
            "assistant",
            [TextPart("Let me look."), ToolCallPart("call_1", "screenshot", {})],
        ),
        Message(
            "tool",
            [ToolResultPart("call_1", (TextPart("the screen"), ImagePart("R0lGOD", "image/gif")))],
        ),
    ]

    await collect(make_provider(), request(messages))

    assert sent_body(route)["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBORw0KGgo=",
                    "detail": "auto",
                },
            ],
        },
        {"role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "call_1", "name": "screenshot", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {"type": "input_text", "text": "the screen"},
                {"type": "input_image", "image_url": "data:image/gif;base64,R0lGOD"},
            ],
        },
    ]


@respx.mock
async def test_reasoning_that_cannot_be_sent_back_is_left_out() -> None:
    route = respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_text.sse"))
    kept = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    messages = [
        Message("user", [TextPart("hi")]),
        Message(
            "assistant",
            [
                # Thinking from another vendor, and a reasoning item without encrypted content
                # (the server stored nothing it could find by id).
                ThinkingPart("Claude thought", provider_data={"signature": "EqQBCkYIBxgC"}),
                ThinkingPart("no blob", provider_data={"openai_reasoning:rs_0": {"id": "rs_0"}}),
                ThinkingPart("kept", provider_data={"openai_reasoning:rs_1": kept}),
                TextPart("Hello!"),
            ],
        ),
        Message("user", [TextPart("and?")]),
        # A reasoning item that nothing followed (the call was cut) would be rejected.
        Message("assistant", [ThinkingPart("cut", provider_data={"openai_reasoning:rs_2": kept})]),
        Message("user", [TextPart("go on")]),
    ]

    await collect(make_provider(), request(messages, "o4-mini"))

    body = sent_body(route)
    assert [item.get("type") or item["role"] for item in body["input"]] == [
        "user",
        "reasoning",
        "assistant",
        "user",
        "user",
    ]
    assert body["input"][1] == kept
    # A reasoning model gets the include even with no effort set.
    assert body["include"] == ["reasoning.encrypted_content"]
    assert "reasoning" not in body


@respx.mock
async def test_thought_level_off_sends_no_effort() -> None:
    route = respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_text.sse"))

    await collect(make_provider(), request(model="o4-mini", thought_level="off"))

    body = sent_body(route)
    assert "reasoning" not in body
    assert body["include"] == ["reasoning.encrypted_content"]


@respx.mock
async def test_each_model_uses_the_api_its_config_names() -> None:
    responses = respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_text.sse"))
    chat = respx.post(CHAT_URL).mock(return_value=sse("openai_text.sse"))
    provider = make_provider()

    await collect(provider, request(model="gpt-4.1"))
    await collect(provider, request(model="gpt-4.1-mini"))
    await collect(provider, request(model="not-configured"))

    assert responses.call_count == 1
    assert chat.call_count == 2


# --- errors -------------------------------------------------------------------------------


@respx.mock
async def test_a_failed_response_raises_provider_unavailable_with_the_vendor_message() -> None:
    respx.post(RESPONSES_URL).mock(return_value=sse("openai_responses_failed.sse"))

    with pytest.raises(ProviderUnavailable, match="The model failed to generate a response"):
        await collect(make_provider(), request(model="o4-mini"))


def failed(code: str, message: str) -> bytes:
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1746011600,
        "status": "failed",
        "model": "gpt-4.1",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": {"code": code, "message": message},
    }
    return event({"type": "response.failed", "sequence_number": 2, "response": response})


@respx.mock
@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        pytest.param(
            failed("rate_limit_exceeded", "Rate limit reached for o4-mini on tokens per min."),
            RateLimitError,
            "rate limited: Rate limit reached",
            id="failed-rate-limit",
        ),
        pytest.param(
            failed(
                "invalid_image", "The image data you provided does not represent a valid image."
            ),
            ProviderError,
            "does not represent a valid image",
            id="failed-invalid-image",
        ),
        pytest.param(
            event(
                {
                    "type": "error",
                    "sequence_number": 1,
                    "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window of this model.",
                    "param": "input",
                }
            ),
            ContextWindowError,
            "exceeds the context window",
            id="error-event",
        ),
        pytest.param(
            event(
                {
                    "type": "error",
                    "sequence_number": 1,
                    "error": {
                        "type": "server_error",
                        "code": "server_error",
                        "message": "An error occurred while processing your request.",
                    },
                }
            ),
            ProviderUnavailable,
            "An error occurred while processing",
            id="nested-error-event",
        ),
    ],
)
async def test_error_events_map_to_provider_errors_by_code(
    body: bytes, error: type[ProviderError], message: str
) -> None:
    created = sse_events("openai_responses_text.sse")[:2]
    respx.post(RESPONSES_URL).mock(return_value=stream_of([*created, body]))

    with pytest.raises(error, match=message) as caught:
        await collect(make_provider(), request())

    assert type(caught.value) is error


# --- Azure --------------------------------------------------------------------------------

AZURE = "https://contoso-ai.openai.azure.com"


def make_azure(env: dict[str, str] | None = None, **config: Any) -> OpenAIChatProvider:
    settings: dict[str, Any] = {"type": "azure-openai", "base_url": AZURE, "models": MODELS}
    settings.update(config)
    env = {"AZURE_OPENAI_API_KEY": "azure-key-1234"} if env is None else env
    return OpenAIChatProvider("azure", OpenAIProviderConfig(**settings), env)


@respx.mock
async def test_azure_chat_goes_to_the_deployment_url_with_the_default_api_version() -> None:
    route = respx.post(f"{AZURE}/openai/deployments/gpt-4.1-mini/chat/completions").mock(
        return_value=sse("openai_text.sse")
    )

    await collect(make_azure(), request(model="gpt-4.1-mini"))

    sent = route.calls.last.request
    assert sent.url.params["api-version"] == "2025-04-01-preview"
    assert sent.headers["api-key"] == "azure-key-1234"
    assert "authorization" not in sent.headers


@respx.mock
async def test_azure_responses_use_the_configured_api_version() -> None:
    route = respx.post(f"{AZURE}/openai/responses").mock(
        return_value=sse("openai_responses_text.sse")
    )

    await collect(make_azure(api_version="2025-06-01-preview"), request(model="gpt-4.1"))

    sent = route.calls.last.request
    assert sent.url.params["api-version"] == "2025-06-01-preview"
    assert json.loads(sent.content)["model"] == "gpt-4.1"


@respx.mock
async def test_azure_v1_base_url_is_called_without_an_api_version() -> None:
    route = respx.post(f"{AZURE}/openai/v1/responses").mock(
        return_value=sse("openai_responses_text.sse")
    )

    await collect(make_azure(base_url=f"{AZURE}/openai/v1"), request(model="gpt-4.1"))

    sent = route.calls.last.request
    assert "api-version" not in sent.url.params
    assert sent.headers["authorization"] == "Bearer azure-key-1234"


async def test_azure_without_a_key_names_its_variable() -> None:
    with pytest.raises(ProviderError, match="AZURE_OPENAI_API_KEY is not set"):
        await collect(make_azure(env={"OPENAI_API_KEY": KEY}), request())
