"""The Chat Completions provider against respx mocks replaying recorded-shape SSE streams."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx
from provider_support import (
    READ_FILE,
    RecordingStream,
    collector,
    sent_body,
    sse,
    sse_events,
)

from acp_agent.config import ModelConfig, OpenAIProviderConfig
from acp_agent.messages import (
    ImagePart,
    Message,
    Stop,
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
    AuthError,
    ContextWindowError,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
)
from acp_agent.providers.openai_chat import OpenAIChatProvider

pytestmark = pytest.mark.anyio

OPENAI_URL = "https://api.openai.com/v1/chat/completions"
KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
HELLO = ModelRequest(model="gpt-4.1", system="", messages=[Message("user", [TextPart("hi")])])


def make_provider(
    env: dict[str, str] | None = None, name: str = "openai", **config: Any
) -> OpenAIChatProvider:
    settings: dict[str, Any] = {"type": "openai", "models": (ModelConfig(id="gpt-4.1"),)}
    settings.update(config)
    env = {"OPENAI_API_KEY": KEY} if env is None else env
    return OpenAIChatProvider(name, OpenAIProviderConfig(**settings), env)


def error(status: int, body: object) -> httpx.Response:
    return httpx.Response(status, json=body)


collect = collector(HELLO)


# --- stream mapping -----------------------------------------------------------------------


@respx.mock
async def test_parallel_tool_calls_keep_their_own_ids_and_arguments() -> None:
    respx.post(OPENAI_URL).mock(return_value=sse("openai_parallel_tool_calls.sse"))

    events = await collect(make_provider())

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
    assert events[-1] == Stop("tool_use")


@respx.mock
async def test_reasoning_content_becomes_thinking_and_usage_on_the_last_chunk_counts() -> None:
    respx.post(OPENAI_URL).mock(return_value=sse("deepseek_reasoning.sse"))

    events = await collect(make_provider())

    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert (thinking, text) == ("The user greets me.", "Hi! How can I help?")
    assert isinstance(events[0], ThinkingDelta)
    assert events[-2:] == [Usage(input_tokens=11, output_tokens=19), Stop("end_turn")]


@respx.mock
async def test_ollama_reasoning_field_is_thinking_and_its_stop_after_tool_calls_is_tool_use() -> (
    None
):
    respx.post("http://localhost:11434/v1/chat/completions").mock(
        return_value=sse("ollama_reasoning_tool_call.sse")
    )
    provider = make_provider(env={}, type="openai-compatible", base_url="http://localhost:11434/v1")

    events = await collect(provider)

    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == (
        "I should read the file."
    )
    assert [e for e in events if not isinstance(e, ThinkingDelta)] == [
        ToolCallStart("call_3kv9x1de", "read_file"),
        ToolCallArgsDelta("call_3kv9x1de", '{"path":"README.md"}'),
        ToolCallEnd(ToolCallPart("call_3kv9x1de", "read_file", {"path": "README.md"})),
        Usage(input_tokens=182, output_tokens=41),
        Stop("tool_use"),
    ]


@respx.mock
async def test_finish_reason_length_stops_with_max_tokens() -> None:
    respx.post(OPENAI_URL).mock(return_value=sse("openai_length.sse"))

    events = await collect(make_provider())

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Once upon a time,"
    assert events[-1] == Stop("max_tokens")


@respx.mock
async def test_a_tool_call_cut_off_by_the_output_limit_stops_with_max_tokens_not_tool_use() -> None:
    respx.post(OPENAI_URL).mock(return_value=sse("openai_length_tool_call.sse"))

    events = await collect(make_provider())

    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert end.call.name == "write_file"
    assert events[-1] == Stop("max_tokens")


@respx.mock
async def test_content_filter_stops_with_refusal_after_a_chunk_without_choices() -> None:
    respx.post(OPENAI_URL).mock(return_value=sse("azure_content_filter.sse"))

    events = await collect(make_provider())

    assert events == [
        TextDelta("The"),
        TextDelta(" scene"),
        TextDelta(" shows"),
        Usage(input_tokens=96, output_tokens=3),
        Stop("refusal"),
    ]


@respx.mock
async def test_tool_arguments_that_are_not_json_reach_the_tool_layer_raw() -> None:
    respx.post(OPENAI_URL).mock(return_value=sse("openai_invalid_tool_args.sse"))

    events = await collect(make_provider())

    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert end.call.arguments == {"_invalid_json": '{"path": "a.txt", "content": "unterminated'}
    assert events[-1] == Stop("tool_use")


# --- errors -------------------------------------------------------------------------------


@respx.mock(assert_all_called=False)
async def test_missing_key_for_openai_raises_auth_error_before_any_request() -> None:
    route = respx.post(OPENAI_URL).mock(return_value=sse("openai_text.sse"))

    with pytest.raises(AuthError) as caught:
        await collect(make_provider(env={}))

    assert "OPENAI_API_KEY is not set" in str(caught.value)
    assert "providers.openai.api_key_env" in str(caught.value)
    assert not route.called


async def test_missing_key_names_the_configured_variable() -> None:
    provider = make_provider(
        env={"OPENAI_API_KEY": KEY}, name="work", api_key_env="WORK_OPENAI_KEY"
    )

    with pytest.raises(AuthError) as caught:
        await collect(provider)

    assert "WORK_OPENAI_KEY is not set" in str(caught.value)
    assert "providers.work.api_key_env" in str(caught.value)


@respx.mock
async def test_openai_compatible_server_without_a_key_gets_a_placeholder() -> None:
    route = respx.post("http://localhost:8000/v1/chat/completions").mock(
        return_value=sse("openai_text.sse")
    )
    provider = make_provider(env={}, type="openai-compatible", base_url="http://localhost:8000/v1")

    await collect(provider)

    assert route.calls.last.request.headers["authorization"] == "Bearer not-needed"


@respx.mock
async def test_a_vllm_context_overflow_without_a_code_is_a_context_window_error() -> None:
    body = {
        "object": "error",
        "message": "This model's maximum context length is 32768 tokens. However, you "
        "requested 40211 tokens (36115 in the messages, 4096 in the completion).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    respx.post(OPENAI_URL).mock(return_value=error(400, body))

    with pytest.raises(ContextWindowError, match="maximum context length"):
        await collect(make_provider())


@respx.mock
async def test_other_status_errors_keep_the_vendor_message_and_status() -> None:
    body = {
        "error": {
            "message": "The model `gpt-9` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    respx.post(OPENAI_URL).mock(return_value=error(404, body))

    with pytest.raises(ProviderError) as caught:
        await collect(make_provider())

    assert type(caught.value) is ProviderError
    assert str(caught.value) == (
        "openai: HTTP 404 from https://api.openai.com/v1/chat/completions: The model `gpt-9` "
        "does not exist or you do not have access to it. Check the model id."
    )


@respx.mock
async def test_an_error_given_as_a_bare_string_is_shown_as_is() -> None:
    respx.post("http://localhost:11434/v1/chat/completions").mock(
        return_value=error(404, {"error": "model 'llama9' not found, try pulling it first"})
    )
    provider = make_provider(env={}, type="openai-compatible", base_url="http://localhost:11434/v1")

    with pytest.raises(ProviderError, match=r"HTTP 404 from \S+: model 'llama9' not found"):
        await collect(provider)


@respx.mock
async def test_unreachable_server_raises_provider_unavailable_naming_the_url() -> None:
    respx.post("https://llm.example.com/v1/chat/completions").mock(
        side_effect=httpx.ConnectError("[Errno 111] Connection refused")
    )
    provider = make_provider(
        env={}, type="openai-compatible", base_url="https://llm.example.com/v1"
    )

    with pytest.raises(
        ProviderUnavailable, match=r"connection to https://llm.example.com/v1 failed: .*refused"
    ):
        await collect(provider)


@respx.mock
async def test_timeout_raises_provider_unavailable_naming_the_setting() -> None:
    respx.post(OPENAI_URL).mock(side_effect=httpx.ReadTimeout("timed out"))

    with pytest.raises(ProviderUnavailable, match=r"within 30s.*providers\.openai\.timeout"):
        await collect(make_provider(timeout=30))


@respx.mock
async def test_error_event_inside_the_stream_raises_provider_error() -> None:
    events = [
        *sse_events("openai_text.sse")[:2],
        b'data: {"error":{"message":"The server is overloaded","type":"server_error"}}\n\n',
    ]
    respx.post(OPENAI_URL).mock(return_value=httpx.Response(200, stream=RecordingStream(events)))

    with pytest.raises(ProviderError, match="The server is overloaded"):
        await collect(make_provider())


@respx.mock
async def test_a_stream_event_that_is_not_json_raises_provider_error() -> None:
    events = [*sse_events("openai_text.sse")[:2], b"data: <html>502 Bad Gateway</html>\n\n"]
    respx.post(OPENAI_URL).mock(return_value=httpx.Response(200, stream=RecordingStream(events)))

    with pytest.raises(ProviderError, match="not JSON: '<html>502 Bad Gateway</html>'"):
        await collect(make_provider())


# --- request ------------------------------------------------------------------------------

TOOLS = (READ_FILE,)
CONVERSATION = [
    Message("user", [TextPart("What is in this picture?"), ImagePart("iVBORw0KGgo=", "image/png")]),
    Message(
        "assistant",
        [
            ThinkingPart("The user wants the file.", provider_data={"signature": "x"}),
            TextPart("Let me read it."),
            ToolCallPart("call_1", "read_file", {"path": "a.txt"}),
        ],
    ),
    Message(
        "tool",
        [
            ToolResultPart("call_1", (TextPart("hello"), ImagePart("R0lGOD", "image/gif"))),
        ],
    ),
    Message("user", [TextPart("thanks")]),
]


@respx.mock
async def test_request_body_maps_every_role_and_part() -> None:
    route = respx.post(OPENAI_URL).mock(return_value=sse("openai_text.sse"))
    request = ModelRequest(
        model="gpt-4.1",
        system="You are a coding agent.",
        messages=CONVERSATION,
        tools=TOOLS,
        max_output_tokens=1024,
    )

    await collect(make_provider(), request)

    body = sent_body(route)
    assert body["messages"] == [
        {"role": "system", "content": "You are a coding agent."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me read it.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "hello\n[image (image/gif): in the user message after the tool results]",
        },
        {
            # Tool messages take text only: the tool's image follows in a user message.
            "role": "user",
            "content": [
                {"type": "text", "text": "[tool call call_1 returned:]"},
                {"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lGOD"}},
            ],
        },
        {"role": "user", "content": "thanks"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a text file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    assert body["model"] == "gpt-4.1"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 1024
    assert "max_tokens" not in body


@respx.mock
async def test_request_without_tools_or_limit_omits_them() -> None:
    route = respx.post(OPENAI_URL).mock(return_value=sse("openai_text.sse"))

    await collect(make_provider())

    body = sent_body(route)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert not {"tools", "max_tokens", "max_completion_tokens"} & body.keys()


@respx.mock
async def test_max_tokens_param_quirk_sends_max_tokens() -> None:
    route = respx.post(OPENAI_URL).mock(return_value=sse("openai_text.sse"))
    request = ModelRequest(
        model="gpt-4.1", system="", messages=HELLO.messages, max_output_tokens=64
    )

    await collect(make_provider(max_tokens_param="max_tokens"), request)

    body = sent_body(route)
    assert body["max_tokens"] == 64
    assert "max_completion_tokens" not in body


@respx.mock
async def test_failed_tool_result_tells_the_model_it_failed() -> None:
    route = respx.post(OPENAI_URL).mock(return_value=sse("openai_text.sse"))
    messages = [
        Message("assistant", [ToolCallPart("call_9", "read_file", {"path": "nope"})]),
        Message("tool", [ToolResultPart("call_9", (TextPart("no such file"),), is_error=True)]),
    ]

    await collect(make_provider(), ModelRequest(model="gpt-4.1", system="", messages=messages))

    assert sent_body(route)["messages"][1] == {
        "role": "tool",
        "tool_call_id": "call_9",
        "content": "Error: no such file",
    }


@respx.mock
async def test_the_base_url_from_config_is_the_one_called() -> None:
    route = respx.post("https://llm.internal.example/openai/v1/chat/completions").mock(
        return_value=sse("openai_text.sse")
    )
    provider = make_provider(base_url="https://llm.internal.example/openai/v1")

    await collect(provider)

    assert route.called
    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"


async def test_an_unsupported_part_is_a_provider_error() -> None:
    messages = [Message("user", [ToolCallPart("call_1", "read_file", {})])]

    with pytest.raises(ProviderError, match="a user message cannot carry ToolCallPart"):
        await collect(make_provider(), ModelRequest(model="gpt-4.1", system="", messages=messages))


# --- reasoning effort ---------------------------------------------------------------------


@respx.mock
@pytest.mark.parametrize(
    ("reasoning", "thought_level", "sent"),
    [
        pytest.param(True, "high", "high", id="reasoning-model"),
        pytest.param(True, "low", "low", id="reasoning-model-low"),
        pytest.param(True, "off", None, id="off"),
        pytest.param(True, None, None, id="no-level"),
        pytest.param(False, "high", None, id="not-a-reasoning-model"),
    ],
)
async def test_reasoning_effort_is_sent_for_reasoning_models_only(
    reasoning: bool, thought_level: Any, sent: str | None
) -> None:
    route = respx.post(OPENAI_URL).mock(return_value=sse("openai_text.sse"))
    provider = make_provider(models=(ModelConfig(id="o4-mini", reasoning=reasoning),))
    request = ModelRequest(
        model="o4-mini", system="", messages=HELLO.messages, thought_level=thought_level
    )

    await collect(provider, request)

    assert sent_body(route).get("reasoning_effort") == sent


# --- retry hints --------------------------------------------------------------------------


@respx.mock
async def test_a_server_error_event_mid_stream_is_unavailable_not_a_plain_error() -> None:
    events = [
        *sse_events("openai_text.sse")[:2],
        b'data: {"error":{"message":"The server is overloaded","type":"server_error"}}\n\n',
    ]
    respx.post(OPENAI_URL).mock(return_value=httpx.Response(200, stream=RecordingStream(events)))

    with pytest.raises(ProviderUnavailable, match="The server is overloaded"):
        await collect(make_provider())


@respx.mock
async def test_client_errors_are_not_retryable() -> None:
    body = {"error": {"message": "Invalid value for 'model'.", "type": "invalid_request_error"}}
    respx.post(OPENAI_URL).mock(return_value=error(422, body))

    with pytest.raises(ProviderError) as caught:
        await collect(make_provider())

    assert not caught.value.retryable


@respx.mock
async def test_requests_carry_the_headers_the_sdk_sent_without_the_sdk() -> None:
    route = respx.post("https://api.openai.com/v1/chat/completions").mock(
        return_value=sse("openai_text.sse")
    )
    env = {"OPENAI_API_KEY": KEY, "OPENAI_ORG_ID": "org-7", "OPENAI_PROJECT_ID": "proj-9"}

    await collect(make_provider(env=env))

    headers = route.calls.last.request.headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["openai-organization"] == "org-7"
    assert headers["openai-project"] == "proj-9"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("acp-agent/")
