"""The Anthropic provider against respx mocks replaying recorded-shape Messages API streams."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from provider_support import (
    READ_FILE,
    RecordingStream,
    bedrock_exception,
    bedrock_frame,
    collector,
    sent_body,
    sse,
    sse_events,
)

from acp_agent.config import AnthropicProviderConfig, ModelConfig, RetryConfig
from acp_agent.engine import ModelSettings, ModelSetup, Turn
from acp_agent.messages import (
    ImagePart,
    Message,
    Part,
    RetryNotice,
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
    TurnEvent,
    Usage,
)
from acp_agent.providers import (
    AuthError,
    ContextWindowError,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
    create_provider,
    provider_module_for,
)
from acp_agent.providers.anthropic import AnthropicProvider
from acp_agent.tools import Decision, PermissionQuestion, ToolContext
from acp_agent.tools.local import LocalEditor
from acp_agent.tools.permissions import PermissionMode

pytestmark = pytest.mark.anyio

MESSAGES_URL = "https://api.anthropic.com/v1/messages"
KEY = (
    "sk-ant-api03-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a-AAAA"
)
MODEL = "claude-sonnet-4-6"
HELLO = ModelRequest(model=MODEL, system="", messages=[Message("user", [TextPart("hi")])])
SIGNATURE = (
    "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds3hoDYpcLmMvDqMt2rRM4aOQVT4kBuaXbZTlVBsT"
    "cFdyM0aKxbxr9z8dUVaJUDkCJ5i+c8F9ZaZJCzWW7GQqNhHjd4JmrhbtqTUFbTNeE3Fp2j8NqEM0S3s="
)


def make_provider(
    env: dict[str, str] | None = None, name: str = "anthropic", **config: Any
) -> AnthropicProvider:
    settings: dict[str, Any] = {
        "type": "anthropic",
        "models": (ModelConfig(id=MODEL, reasoning=True),),
        "prompt_caching": False,
    }
    settings.update(config)
    env = {"ANTHROPIC_API_KEY": KEY} if env is None else env
    return AnthropicProvider(name, AnthropicProviderConfig(**settings), env)


def api_error(
    status: int, kind: str, message: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    headers = {"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy", **(headers or {})}
    return httpx.Response(status, json=body, headers=headers)


collect = collector(HELLO)


def reply_from(events: Sequence[StreamEvent]) -> Message:
    """The assistant message the engine keeps: one thinking part per block, calls last."""
    parts: list[Part] = []
    thinking: list[str] = []
    text: list[str] = []
    for event in events:
        match event:
            case ThinkingDelta(text=delta, provider_data=data, ends_block=ends):
                thinking.append(delta)
                if ends:  # the delta that closes a block carries its signature
                    parts.append(ThinkingPart("".join(thinking), data))
                    thinking = []
            case TextDelta(text=delta):
                text.append(delta)
    if text:
        parts.append(TextPart("".join(text)))
    parts.extend(event.call for event in events if isinstance(event, ToolCallEnd))
    return Message("assistant", parts)


# --- stream mapping -----------------------------------------------------------------------


@respx.mock
async def test_parallel_tool_use_blocks_keep_their_own_ids_and_inputs() -> None:
    respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_parallel_tool_calls.sse"))

    events = await collect(make_provider())

    first, second = "toolu_01VkcsL2oJpUCDvrMyUzPSYd", "toolu_01NRLabsLyVHZPKxbKvkfSMn"
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
    assert events[-2:] == [Usage(input_tokens=688, output_tokens=96), Stop("tool_use")]


@respx.mock
async def test_tool_input_that_is_not_json_reaches_the_tool_layer_raw() -> None:
    respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_invalid_tool_input.sse"))

    events = await collect(make_provider())

    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert end.call.arguments == {"_invalid_json": '{"path": "a.txt", "content": "unterminated'}
    assert events[-1] == Stop("max_tokens")


@respx.mock
async def test_thinking_streams_as_thinking_deltas_and_the_signature_closes_the_block() -> None:
    respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_thinking_tool_call.sse"))

    events = await collect(make_provider())

    assert events[:3] == [
        ThinkingDelta("The user wants to know what app.py does."),
        ThinkingDelta(" I should read it before answering."),
        ThinkingDelta("", provider_data={"signature": SIGNATURE}, ends_block=True),
    ]
    assert events[3] == TextDelta("Let me read it.")
    assert events[-1] == Stop("tool_use")


@respx.mock
async def test_the_next_request_sends_the_signed_thinking_back_before_text_and_tool_use() -> None:
    route = respx.post(MESSAGES_URL).mock(
        side_effect=[sse("anthropic_thinking_tool_call.sse"), sse("anthropic_text.sse")]
    )
    provider = make_provider()
    question = Message("user", [TextPart("What does app.py do?")])
    first = ModelRequest(model=MODEL, system="", messages=[question], thought_level="medium")

    reply = reply_from(await collect(provider, first))
    result = Message("tool", [ToolResultPart("toolu_01CbpR3QyNTnAEVp9QG3YDRB", (TextPart("x"),))])
    second = ModelRequest(
        model=MODEL, system="", messages=[question, reply, result], thought_level="medium"
    )
    await collect(provider, second)

    body = sent_body(route)
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "The user wants to know what app.py does. I should read it before "
                "answering.",
                "signature": SIGNATURE,
            },
            {"type": "text", "text": "Let me read it."},
            {
                "type": "tool_use",
                "id": "toolu_01CbpR3QyNTnAEVp9QG3YDRB",
                "name": "read_file",
                "input": {"path": "app.py"},
            },
        ],
    }
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}


@respx.mock
async def test_redacted_thinking_is_kept_opaque_and_sent_back_as_it_came() -> None:
    route = respx.post(MESSAGES_URL).mock(
        side_effect=[sse("anthropic_redacted_thinking.sse"), sse("anthropic_text.sse")]
    )
    provider = make_provider()

    events = await collect(provider)
    data = (
        "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB4U"
        "Rj2pqmM0JHDXc2gh+Pe6KhRdU2ZYd7ltxwjXb4JdnWY1YqlO0A=="
    )
    assert events[0] == ThinkingDelta("", provider_data={"redacted_data": data}, ends_block=True)
    assert events[1:] == [
        TextDelta("Done."),
        Usage(input_tokens=96, output_tokens=210),
        Stop("end_turn"),
    ]

    history = [*HELLO.messages, reply_from(events), Message("user", [TextPart("and now?")])]
    await collect(provider, ModelRequest(model=MODEL, system="", messages=history))

    assert sent_body(route)["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": data},
        {"type": "text", "text": "Done."},
    ]


@respx.mock
async def test_two_signed_thinking_blocks_of_one_reply_go_back_as_two_blocks(
    tmp_path: Path,
) -> None:
    # Through the real turn: the engine keeps a block apart only because the provider marks
    # where it ends (it knows no vendor's keys), and the API refuses merged blocks.
    route = respx.post(MESSAGES_URL).mock(
        side_effect=[sse("anthropic_two_thinking_blocks.sse"), sse("anthropic_text.sse")]
    )
    history: list[Message] = []
    turn = _turn(make_provider(), history, tmp_path)
    await turn.run(Message("user", [TextPart("Two numbers?")]))
    await turn.run(Message("user", [TextPart("and now?")]))

    assert sent_body(route)["messages"][1]["content"] == [
        {
            "type": "thinking",
            "thinking": "The user asks for two numbers.",
            "signature": "EqQBCgIYAhIMZmlyc3QgYmxvY2sgc2lnbmVk",
        },
        {
            "type": "thinking",
            "thinking": "Seven and eleven will do.",
            "signature": "EqQBCgIYAhIMc2Vjb25kIGJsb2NrIHNpZ25lZA==",
        },
        {"type": "text", "text": "7 and 11."},
    ]


class _Choices:
    def __init__(self, provider: AnthropicProvider) -> None:
        self.mode: PermissionMode = "ask"
        self._setup = ModelSetup(
            provider,
            ModelSettings(
                model=MODEL, system_prompt="", context_window=200_000, thought_level="medium"
            ),
        )

    async def model_setup(self) -> ModelSetup:
        return self._setup


class _Host:
    async def emit(self, event: TurnEvent) -> None:
        pass

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        return "reject_once"

    def keep(self, message: Message, message_id: str | None) -> None:
        pass


def _turn(provider: AnthropicProvider, history: list[Message], cwd: Path) -> Turn:
    context = ToolContext(session_id="s", cwd=cwd, roots=(cwd,), editor=LocalEditor())  # type: ignore[arg-type]
    return Turn(_Choices(provider), history, tools={}, context=context, host=_Host())


@respx.mock
async def test_stop_reason_max_tokens_stops_with_max_tokens() -> None:
    respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_max_tokens.sse"))

    events = await collect(make_provider())

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Once upon a time,"
    assert events[-1] == Stop("max_tokens")


@respx.mock
async def test_stop_reason_refusal_stops_with_refusal_after_the_partial_text() -> None:
    respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_refusal.sse"))

    events = await collect(make_provider())

    assert events == [
        TextDelta("I can't help"),
        Usage(input_tokens=88, output_tokens=4),
        Stop("refusal"),
    ]


@respx.mock
async def test_pause_turn_is_reported_and_server_tool_blocks_are_not_client_calls() -> None:
    respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_pause_turn.sse"))

    events = await collect(make_provider())

    assert events == [
        TextDelta("I'll search for the release notes."),
        Usage(input_tokens=2679, output_tokens=94),
        Stop("pause_turn"),
    ]


@respx.mock
async def test_usage_reports_uncached_input_and_cache_reads_and_writes_apart() -> None:
    respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_cache_usage.sse"))

    events = await collect(make_provider())

    assert events[-2] == Usage(
        input_tokens=14, output_tokens=6, cache_read_tokens=24301, cache_write_tokens=1840
    )


# --- errors -------------------------------------------------------------------------------


@respx.mock(assert_all_called=False)
async def test_missing_key_raises_auth_error_before_any_request() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))

    with pytest.raises(AuthError) as caught:
        await collect(make_provider(env={}))

    assert "ANTHROPIC_API_KEY is not set" in str(caught.value)
    assert "providers.anthropic.api_key_env" in str(caught.value)
    assert not route.called


async def test_missing_key_names_the_configured_variable() -> None:
    provider = make_provider(
        env={"ANTHROPIC_API_KEY": KEY}, name="work", api_key_env="WORK_ANTHROPIC_KEY"
    )

    with pytest.raises(AuthError) as caught:
        await collect(provider)

    assert "WORK_ANTHROPIC_KEY is not set" in str(caught.value)
    assert "providers.work.api_key_env" in str(caught.value)


@respx.mock
async def test_the_key_from_the_configured_variable_is_the_one_sent() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))

    await collect(make_provider(env={"WORK_KEY": KEY}, api_key_env="WORK_KEY"))

    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"


@respx.mock
@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (
            400,
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, "
            "decrease input length or `max_tokens` and try again",
        ),
        (413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
    ],
    ids=["exceeds-context-limit", "request-too-large"],
)
async def test_context_overflow_raises_context_window_error(
    status: int, kind: str, message: str
) -> None:
    respx.post(MESSAGES_URL).mock(return_value=api_error(status, kind, message))

    with pytest.raises(ContextWindowError, match=message.split(":")[0]):
        await collect(make_provider())


@respx.mock
async def test_other_status_errors_keep_the_vendor_message_and_status() -> None:
    respx.post(MESSAGES_URL).mock(
        return_value=api_error(404, "not_found_error", "model: claude-sonnet-9")
    )

    with pytest.raises(ProviderError) as caught:
        await collect(make_provider())

    assert type(caught.value) is ProviderError
    assert str(caught.value) == (
        "anthropic: HTTP 404 from https://api.anthropic.com/v1/messages: model: "
        "claude-sonnet-9. Check the model id."
    )


@respx.mock
async def test_unreachable_server_raises_provider_unavailable_naming_the_url() -> None:
    respx.post("https://llm-gateway.example.com/v1/messages").mock(
        side_effect=httpx.ConnectError("[Errno 111] Connection refused")
    )

    with pytest.raises(
        ProviderUnavailable,
        match=r"connection to https://llm-gateway.example.com failed: .*refused",
    ):
        await collect(make_provider(base_url="https://llm-gateway.example.com"))


@respx.mock
async def test_timeout_raises_provider_unavailable_naming_the_setting() -> None:
    respx.post(MESSAGES_URL).mock(side_effect=httpx.ReadTimeout("timed out"))

    with pytest.raises(ProviderUnavailable, match=r"within 30s.*providers\.anthropic\.timeout"):
        await collect(make_provider(timeout=30))


@respx.mock
async def test_error_event_mid_stream_raises_provider_unavailable() -> None:
    respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_error_event.sse"))
    seen: list[StreamEvent] = []

    with pytest.raises(
        ProviderUnavailable, match=r"mid-way \(overloaded_error\): Overloaded"
    ) as caught:
        await collect(make_provider(), into=seen)

    assert caught.value.retryable
    assert seen == [TextDelta("Looking at")]


# --- request ------------------------------------------------------------------------------

TOOLS = (
    READ_FILE,
    ToolSpec(
        name="grep",
        description="Search files.",
        parameters={"type": "object", "properties": {"pattern": {"type": "string"}}},
    ),
)
CONVERSATION = [
    Message("user", [TextPart("What is in this picture?"), ImagePart("iVBORw0KGgo=", "image/png")]),
    Message(
        "assistant",
        [
            TextPart("Let me read it."),
            ThinkingPart("Read the file.", provider_data={"signature": "sig-1"}),
            ToolCallPart("toolu_1", "read_file", {"path": "a.txt"}),
        ],
    ),
    Message(
        "tool",
        [
            ToolResultPart("toolu_1", (TextPart("hello"), ImagePart("R0lGOD", "image/gif"))),
        ],
    ),
    Message("user", [TextPart("thanks")]),
]


@respx.mock
async def test_request_body_maps_every_role_and_part() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    request = ModelRequest(
        model=MODEL,
        system="You are a coding agent.",
        messages=CONVERSATION,
        tools=TOOLS[:1],
        max_output_tokens=1024,
    )

    await collect(make_provider(), request)

    body = sent_body(route)
    assert body["system"] == [{"type": "text", "text": "You are a coding agent."}]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Read the file.", "signature": "sig-1"},
                {"type": "text", "text": "Let me read it."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "a.txt"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "hello"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/gif",
                                "data": "R0lGOD",
                            },
                        },
                    ],
                },
                {"type": "text", "text": "thanks"},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a text file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert body["max_tokens"] == 1024
    assert "thinking" not in body


@respx.mock
async def test_request_without_system_tools_or_limit_omits_them_and_sends_the_default_limit() -> (
    None
):
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))

    await collect(make_provider())

    body = sent_body(route)
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["max_tokens"] == 8192
    assert not {"system", "tools", "thinking"} & body.keys()


@respx.mock
async def test_failed_tool_result_is_marked_is_error() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    messages = [
        *HELLO.messages,
        Message("assistant", [ToolCallPart("toolu_9", "read_file", {"path": "nope"})]),
        Message("tool", [ToolResultPart("toolu_9", (TextPart("no such file"),), is_error=True)]),
    ]

    await collect(make_provider(), ModelRequest(model=MODEL, system="", messages=messages))

    assert sent_body(route)["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_9",
                "content": [{"type": "text", "text": "no such file"}],
                "is_error": True,
            }
        ],
    }


@respx.mock
async def test_thinking_from_another_vendor_has_no_signature_and_is_not_sent() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    messages = [
        *HELLO.messages,
        Message("assistant", [ThinkingPart("reasoning from o3"), TextPart("Hello!")]),
        Message("user", [TextPart("again")]),
    ]

    await collect(make_provider(), ModelRequest(model=MODEL, system="", messages=messages))

    assert sent_body(route)["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello!"}],
    }


@respx.mock
async def test_an_image_type_the_api_rejects_is_described_instead_of_sent() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    messages = [Message("user", [ImagePart("Qk0=", "image/bmp"), TextPart("what is this?")])]

    await collect(make_provider(), ModelRequest(model=MODEL, system="", messages=messages))

    assert sent_body(route)["messages"][0]["content"][0] == {
        "type": "text",
        "text": "[image (image/bmp) not sent: the API takes JPEG, PNG, GIF, WebP]",
    }


@respx.mock
async def test_a_paused_turn_continues_from_the_assistant_message_without_trailing_space() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    messages = [*HELLO.messages, Message("assistant", [TextPart("I'll search for it.\n\n")])]

    await collect(make_provider(), ModelRequest(model=MODEL, system="", messages=messages))

    assert sent_body(route)["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I'll search for it."}],
    }


@respx.mock
async def test_prompt_caching_marks_system_last_tool_and_last_user_block_only() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    request = ModelRequest(
        model=MODEL, system="You are a coding agent.", messages=CONVERSATION[:3], tools=TOOLS
    )

    await collect(make_provider(prompt_caching=True), request)

    body = sent_body(route)
    ephemeral = {"type": "ephemeral"}
    assert body["system"][-1]["cache_control"] == ephemeral
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == ephemeral
    last = body["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][-1]["type"] == "tool_result"
    assert last["content"][-1]["cache_control"] == ephemeral
    assert json.dumps(body).count('"cache_control"') == 3  # within the API's limit of 4


@respx.mock
async def test_prompt_caching_off_sends_no_cache_control() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    request = ModelRequest(model=MODEL, system="S", messages=CONVERSATION, tools=TOOLS)

    await collect(make_provider(prompt_caching=False), request)

    assert "cache_control" not in route.calls.last.request.content.decode()


@respx.mock
@pytest.mark.parametrize(
    ("level", "limit", "thinking", "max_tokens"),
    [
        ("high", None, {"type": "enabled", "budget_tokens": 24576}, 32000),
        ("medium", None, {"type": "enabled", "budget_tokens": 8192}, 24192),
        ("low", None, {"type": "enabled", "budget_tokens": 2048}, 18048),
        ("high", 16000, {"type": "enabled", "budget_tokens": 14976}, 16000),
        ("low", 1500, None, 1500),
        ("off", None, None, 8192),
        (None, None, None, 8192),
    ],
)
async def test_thought_level_sets_a_thinking_budget_below_max_tokens(
    level: Any, limit: int | None, thinking: dict[str, Any] | None, max_tokens: int
) -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    request = ModelRequest(
        model=MODEL,
        system="",
        messages=HELLO.messages,
        thought_level=level,
        max_output_tokens=limit,
    )

    await collect(make_provider(), request)

    body = sent_body(route)
    assert body.get("thinking") == thinking
    assert body["max_tokens"] == max_tokens
    if thinking is not None:
        assert body["max_tokens"] > thinking["budget_tokens"]


@respx.mock
async def test_thinking_is_not_switched_on_in_the_middle_of_a_tool_loop_begun_without_it() -> None:
    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))
    messages = [
        *HELLO.messages,
        Message("assistant", [ToolCallPart("toolu_2", "read_file", {"path": "a"})]),
        Message("tool", [ToolResultPart("toolu_2", (TextPart("a"),))]),
    ]

    await collect(
        make_provider(),
        ModelRequest(model=MODEL, system="", messages=messages, thought_level="high"),
    )

    assert "thinking" not in sent_body(route)


# --- clients: create_provider, Bedrock, Vertex --------------------------------------------


@pytest.mark.parametrize("kind", ["anthropic", "anthropic-bedrock", "anthropic-vertex"])
def test_each_anthropic_type_gets_this_provider_without_touching_credentials(kind: str) -> None:
    config = AnthropicProviderConfig(type=kind, models=(ModelConfig(id=MODEL),))

    provider = create_provider("claude", config, {})

    assert provider.name == "claude"
    assert isinstance(getattr(provider, "inner", provider), AnthropicProvider)
    assert provider_module_for(config) == "acp_agent.providers.anthropic"


@pytest.mark.parametrize(
    ("kind", "module", "hint"),
    [
        ("anthropic-bedrock", "boto3", "pip install 'acp-llm-agent[bedrock]'"),
        ("anthropic-vertex", "google.auth", "pip install 'acp-llm-agent[vertex]'"),
    ],
)
async def test_a_cloud_type_without_its_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, kind: str, module: str, hint: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import <module>` raise ImportError
    provider = make_provider(type=kind, region="us-east-1", project_id="my-project")

    with pytest.raises(ProviderError) as caught:
        await collect(provider)

    assert type(caught.value) is ProviderError
    assert hint in str(caught.value)
    assert isinstance(caught.value.__cause__, ImportError)


async def test_bedrock_without_a_region_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")

    with pytest.raises(ProviderError, match=r"providers\.bedrock\.region \(or AWS_REGION\)"):
        await collect(make_provider(name="bedrock", type="anthropic-bedrock"))


@respx.mock
async def test_bedrock_streams_from_the_regional_endpoint_and_maps_its_errors() -> None:
    url = (
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/"
        "eu.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream"
    )
    route = respx.post(url).mock(
        return_value=httpx.Response(
            403, json={"message": "Authentication failed: Please make sure your API Key is valid."}
        )
    )
    provider = make_provider(
        env={"BEDROCK_KEY": "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxl"},
        name="bedrock",
        type="anthropic-bedrock",
        region="eu-west-1",
        api_key_env="BEDROCK_KEY",
    )
    request = ModelRequest(
        model="eu.anthropic.claude-sonnet-4-5-20250929-v1:0", system="", messages=HELLO.messages
    )

    with pytest.raises(AuthError) as caught:
        await collect(provider, request)

    assert "AWS credentials" in str(caught.value)
    assert "Authentication failed" in str(caught.value)
    assert "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxl" not in str(caught.value)
    sent = route.calls.last.request
    assert sent.headers["authorization"] == "Bearer ABSKQmVkcm9ja0FQSUtleS1leGFtcGxl"
    assert "model" not in json.loads(sent.content)  # Bedrock takes it in the path


@respx.mock
@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("throttlingException", RateLimitError),
        ("internalServerException", ProviderUnavailable),
        ("modelStreamErrorException", ProviderUnavailable),
        ("serviceUnavailableException", ProviderUnavailable),
        ("validationException", ProviderError),
    ],
)
async def test_a_bedrock_exception_mid_stream_is_retried_only_when_bedrock_says_try_again(
    kind: str, error: type[ProviderError]
) -> None:
    model = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
    frames = [bedrock_frame(event) for event in sse_events("anthropic_text.sse")[:4]]
    respx.post(
        f"https://bedrock-runtime.eu-west-1.amazonaws.com/model/{model}/invoke-with-response-stream"
    ).mock(
        return_value=httpx.Response(
            200,
            headers={"content-type": "application/vnd.amazon.eventstream"},
            stream=RecordingStream([*frames, bedrock_exception(kind, "Bedrock is busy")]),
        )
    )
    provider = make_provider(
        env={"BEDROCK_KEY": "ABSK-test"},
        type="anthropic-bedrock",
        region="eu-west-1",
        api_key_env="BEDROCK_KEY",
    )
    seen: list[StreamEvent] = []

    with pytest.raises(ProviderError, match="Bedrock is busy") as caught:
        await collect(
            provider, ModelRequest(model=model, system="", messages=HELLO.messages), into=seen
        )

    assert type(caught.value) is error
    assert caught.value.retryable is (error is not ProviderError)
    assert seen == [TextDelta("Hello")]


@respx.mock
async def test_overload_before_any_output_is_retried_by_the_shared_wrapper() -> None:
    start, *_, error_event = sse_events("anthropic_error_event.sse")
    route = respx.post(MESSAGES_URL).mock(
        side_effect=[
            api_error(529, "overloaded_error", "Overloaded"),
            httpx.Response(200, stream=RecordingStream([start, error_event])),
            sse("anthropic_text.sse"),
        ]
    )
    config = AnthropicProviderConfig(
        type="anthropic",
        models=(ModelConfig(id=MODEL),),
        retry=RetryConfig(initial_delay=0.001, max_delay=0.001),
    )
    provider = create_provider("anthropic", config, {"ANTHROPIC_API_KEY": KEY})

    events = await collect(provider)

    notices = [e for e in events if isinstance(e, RetryNotice)]
    assert [notice.reason for notice in notices] == [
        "the API is overloaded (HTTP 529): Overloaded",
        "the stream failed mid-way (overloaded_error): Overloaded",
    ]
    assert events[-1] == Stop("end_turn")
    assert route.call_count == 3


@respx.mock
async def test_requests_carry_the_api_version_and_key_the_sdk_sent_without_the_sdk() -> None:
    from anthropic._constants import ANTHROPIC_API_VERSION

    route = respx.post(MESSAGES_URL).mock(return_value=sse("anthropic_text.sse"))

    await collect(make_provider())

    headers = route.calls.last.request.headers
    assert headers["anthropic-version"] == ANTHROPIC_API_VERSION
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"
