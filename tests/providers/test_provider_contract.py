"""The contract every provider keeps, run against each one: OpenAI Chat Completions, OpenAI
Responses, Azure OpenAI, Anthropic directly and through Bedrock and Vertex (respx mocks fed
the recorded streams in `sse/`; Bedrock's framed as its binary event stream), the offline
echo provider and the demo plugin provider.

A behaviour that cannot apply to a provider (HTTP errors of one that makes no request) is
skipped for it by name, with the reason, never left out silently.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx
from provider_support import RecordingStream, bedrock_frame, collect, sse_events

from acp_agent.config import (
    AnthropicProviderConfig,
    EchoProviderConfig,
    ModelConfig,
    OpenAIProviderConfig,
)
from acp_agent.messages import (
    Message,
    Stop,
    StreamEvent,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    Usage,
)
from acp_agent.providers import (
    AuthError,
    ContextWindowError,
    ModelRequest,
    Provider,
    ProviderUnavailable,
    RateLimitError,
)
from acp_agent.providers.anthropic import AnthropicProvider
from acp_agent.providers.echo import EchoProvider
from acp_agent.providers.openai_chat import OpenAIChatProvider

pytestmark = pytest.mark.anyio

KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
DEMO_PLUGIN = Path(__file__).parents[1] / "plugins" / "acp_agent_demo_provider"
NO_HTTP = "makes no HTTP request: there is no status, stream or response to fail"


# --- the replies each provider must give -------------------------------------------------

WORDS = ["Hello", "!", " The", " file", " defines", " two", " functions", "."]
OPENAI_TEXT: list[StreamEvent] = [
    *(TextDelta(word) for word in WORDS),
    Usage(input_tokens=180, output_tokens=9, cache_read_tokens=1024),
    Stop("end_turn"),
]
ANTHROPIC_TEXT: list[StreamEvent] = [
    TextDelta("Hello"),
    TextDelta("! The file defines"),
    TextDelta(" two functions."),
    Usage(input_tokens=1204, output_tokens=12),
    Stop("end_turn"),
]
OPENAI_CALL = "call_Qm2HkYx0pLrVdT8sW1nE4bZc"
ANTHROPIC_CALL = "toolu_01T1x1fJ34qAmk2tNTrN7Up6"
READ_APP = {"path": "src/app.py", "limit": 200}


def tool_reply(
    call_id: str, fragments: Sequence[str], arguments: dict[str, Any], usage: Usage
) -> list[StreamEvent]:
    return [
        ToolCallStart(call_id, "read_file"),
        *(ToolCallArgsDelta(call_id, fragment) for fragment in fragments),
        ToolCallEnd(ToolCallPart(call_id, "read_file", arguments)),
        usage,
        Stop("tool_use"),
    ]


OPENAI_TOOL = tool_reply(
    OPENAI_CALL,
    ['{"', "path", '":"', "src", "/app", ".py", '","', "limit", '":', "200", "}"],
    READ_APP,
    Usage(input_tokens=412, output_tokens=24),
)
RESPONSES_TOOL = tool_reply(
    OPENAI_CALL,
    ['{"', "path", '":"', "src", "/app", ".py", '"}'],
    {"path": "src/app.py"},
    Usage(input_tokens=412, output_tokens=186),
)
ANTHROPIC_TOOL: list[StreamEvent] = [
    TextDelta("I'll read"),
    TextDelta(" the file first."),
    *tool_reply(
        ANTHROPIC_CALL,
        ['{"path": "sr', 'c/app.py"', ', "limit": 2', "00}"],
        READ_APP,
        Usage(input_tokens=472, output_tokens=71),
    ),
]


# --- error bodies, as each API family sends them -----------------------------------------


class OpenAIErrors:
    """`{"error": {...}}` bodies of OpenAI and Azure OpenAI."""

    @staticmethod
    def body(kind: str, message: str, code: str | None = None) -> object:
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def auth(self, message: str) -> object:
        return self.body("invalid_request_error", message, "invalid_api_key")

    def rate_limit(self, message: str) -> object:
        return self.body("tokens", message, "rate_limit_exceeded")

    def server(self, message: str) -> object:
        return self.body("server_error", message)

    def overloaded(self, message: str) -> object:
        return self.body("overloaded_error", message)

    def overflow(self) -> tuple[object, str]:
        message = (
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130211 tokens. Please reduce the length of the messages."
        )
        return self.body("invalid_request_error", message, "context_length_exceeded"), message


class AnthropicErrors:
    """`{"type": "error", "error": {...}}` bodies of Anthropic's API (and Vertex's)."""

    @staticmethod
    def body(kind: str, message: str) -> object:
        return {"type": "error", "error": {"type": kind, "message": message}}

    def auth(self, message: str) -> object:
        return self.body("authentication_error", message)

    def rate_limit(self, message: str) -> object:
        return self.body("rate_limit_error", message)

    def server(self, message: str) -> object:
        return self.body("api_error", message)

    def overloaded(self, message: str) -> object:
        return self.body("overloaded_error", message)

    def overflow(self) -> tuple[object, str]:
        message = "prompt is too long: 208310 tokens > 200000 maximum"
        return self.body("invalid_request_error", message), message


class BedrockErrors:
    """Bedrock's `{"message": ...}` bodies (the type rides in a header we do not read)."""

    def auth(self, message: str) -> object:
        return {"message": message}

    rate_limit = server = overloaded = auth

    def overflow(self) -> tuple[object, str]:
        message = "Input is too long for requested model."
        return {"message": message}, message


ErrorBodies = OpenAIErrors | AnthropicErrors | BedrockErrors


# --- the providers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Wire:
    """How an HTTP provider's API is mocked."""

    url: str
    errors: ErrorBodies
    key_variable: str
    """The variable the key came from, which a refusal must name."""
    fix: str
    """Words of the fix a refusal must give."""
    text_stream: str
    tool_stream: str
    cut: tuple[int, int]
    """(events sent, text deltas they stream) of `text_stream` cut short."""
    bedrock_frames: bool = False
    """The stream is Bedrock's event stream, one frame per event, instead of SSE."""

    def events(self, name: str, count: int | None = None) -> list[bytes]:
        events = sse_events(name)[:count]
        return [bedrock_frame(event) for event in events] if self.bedrock_frames else events

    def stream(
        self, events: Sequence[bytes], **options: Any
    ) -> tuple[httpx.Response, RecordingStream]:
        body = RecordingStream(events, **options)
        content_type = (
            "application/vnd.amazon.eventstream" if self.bedrock_frames else "text/event-stream"
        )
        return httpx.Response(200, headers={"content-type": content_type}, stream=body), body


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[], Provider]
    model: str
    text: list[StreamEvent]
    """The plain text reply, in full."""
    tool: list[StreamEvent] | None
    """The tool call reply, in full but for thinking."""
    wire: Wire | None = None
    tool_prompt: str = ""
    """What to say to a provider that replies to what it is told (echo) to get a tool call."""
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    """Behaviour -> why it cannot apply to this provider."""

    def request(self, prompt: str = "hi") -> ModelRequest:
        return ModelRequest(
            model=self.model, system="", messages=[Message("user", [TextPart(prompt)])]
        )

    @property
    def http(self) -> Wire:
        assert self.wire is not None, f"{self.id} makes no HTTP request"
        return self.wire


def openai_chat() -> Provider:
    config = OpenAIProviderConfig(type="openai", models=(ModelConfig(id="gpt-4.1"),))
    return OpenAIChatProvider("openai", config, {"OPENAI_API_KEY": KEY})


def openai_responses() -> Provider:
    config = OpenAIProviderConfig(
        type="openai", models=(ModelConfig(id="gpt-4.1", api="responses"),)
    )
    return OpenAIChatProvider("openai", config, {"OPENAI_API_KEY": KEY})


def azure_openai() -> Provider:
    config = OpenAIProviderConfig(
        type="azure-openai",
        base_url="https://contoso-ai.openai.azure.com",
        models=(ModelConfig(id="gpt-4.1-mini"),),
    )
    return OpenAIChatProvider("azure", config, {"AZURE_OPENAI_API_KEY": KEY})


def anthropic_direct() -> Provider:
    config = AnthropicProviderConfig(
        type="anthropic", models=(ModelConfig(id="claude-sonnet-4-6"),)
    )
    return AnthropicProvider("anthropic", config, {"ANTHROPIC_API_KEY": KEY})


BEDROCK_MODEL = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"


def anthropic_bedrock() -> Provider:
    config = AnthropicProviderConfig(
        type="anthropic-bedrock",
        region="eu-west-1",
        api_key_env="BEDROCK_API_KEY",
        models=(ModelConfig(id=BEDROCK_MODEL),),
    )
    return AnthropicProvider("bedrock", config, {"BEDROCK_API_KEY": KEY})


def anthropic_vertex() -> Provider:
    config = AnthropicProviderConfig(
        type="anthropic-vertex",
        region="us-east5",
        project_id="acme-agents",
        api_key_env="VERTEX_ACCESS_TOKEN",
        models=(ModelConfig(id="claude-sonnet-4-6"),),
    )
    return AnthropicProvider("vertex", config, {"VERTEX_ACCESS_TOKEN": KEY})


def echo() -> Provider:
    return EchoProvider("echo", EchoProviderConfig(type="echo"))


def demo_plugin() -> Provider:
    """The demo plugin's provider, imported from its source under a name of our own (the
    plugin tests check that its package is imported only when a config names it)."""
    name = "contract_demo_provider"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            name, DEMO_PLUGIN / "acp_agent_demo_provider" / "__init__.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    config = module.DemoConfig(type="demo", models=(ModelConfig(id="demo-1"),))
    provider: Provider = module.DemoProvider("demo", config, {})
    return provider


LOCAL = {
    behaviour: NO_HTTP
    for behaviour in ("refused", "rate_limited", "server_error", "overflow", "dropped", "closed")
}
CASES = [
    Case(
        "openai-chat",
        openai_chat,
        "gpt-4.1",
        OPENAI_TEXT,
        OPENAI_TOOL,
        Wire(
            "https://api.openai.com/v1/chat/completions",
            OpenAIErrors(),
            key_variable="OPENAI_API_KEY",
            fix="providers.openai.api_key_env",
            text_stream="openai_text.sse",
            tool_stream="openai_tool_call.sse",
            cut=(3, 2),
        ),
    ),
    Case(
        "openai-responses",
        openai_responses,
        "gpt-4.1",
        OPENAI_TEXT,
        RESPONSES_TOOL,
        Wire(
            "https://api.openai.com/v1/responses",
            OpenAIErrors(),
            key_variable="OPENAI_API_KEY",
            fix="providers.openai.api_key_env",
            text_stream="openai_responses_text.sse",
            tool_stream="openai_responses_reasoning_tool_call.sse",
            cut=(6, 2),
        ),
    ),
    Case(
        "azure-openai",
        azure_openai,
        "gpt-4.1-mini",
        OPENAI_TEXT,
        OPENAI_TOOL,
        Wire(
            "https://contoso-ai.openai.azure.com/openai/deployments/gpt-4.1-mini/chat/completions",
            OpenAIErrors(),
            key_variable="AZURE_OPENAI_API_KEY",
            fix="providers.azure.api_key_env",
            text_stream="openai_text.sse",
            tool_stream="openai_tool_call.sse",
            cut=(3, 2),
        ),
    ),
    Case(
        "anthropic",
        anthropic_direct,
        "claude-sonnet-4-6",
        ANTHROPIC_TEXT,
        ANTHROPIC_TOOL,
        Wire(
            "https://api.anthropic.com/v1/messages",
            AnthropicErrors(),
            key_variable="ANTHROPIC_API_KEY",
            fix="providers.anthropic.api_key_env",
            text_stream="anthropic_text.sse",
            tool_stream="anthropic_tool_call.sse",
            cut=(5, 2),
        ),
    ),
    Case(
        "anthropic-bedrock",
        anthropic_bedrock,
        BEDROCK_MODEL,
        ANTHROPIC_TEXT,
        ANTHROPIC_TOOL,
        Wire(
            f"https://bedrock-runtime.eu-west-1.amazonaws.com/model/{BEDROCK_MODEL}"
            "/invoke-with-response-stream",
            BedrockErrors(),
            key_variable="BEDROCK_API_KEY",
            fix="AWS_BEARER_TOKEN_BEDROCK",
            text_stream="anthropic_text.sse",
            tool_stream="anthropic_tool_call.sse",
            cut=(5, 2),
            bedrock_frames=True,
        ),
    ),
    Case(
        "anthropic-vertex",
        anthropic_vertex,
        "claude-sonnet-4-6",
        ANTHROPIC_TEXT,
        ANTHROPIC_TOOL,
        Wire(
            "https://us-east5-aiplatform.googleapis.com/v1/projects/acme-agents/locations/"
            "us-east5/publishers/anthropic/models/claude-sonnet-4-6:streamRawPredict",
            AnthropicErrors(),
            key_variable="VERTEX_ACCESS_TOKEN",
            fix="gcloud auth application-default login",
            text_stream="anthropic_text.sse",
            tool_stream="anthropic_tool_call.sse",
            cut=(5, 2),
        ),
    ),
    Case(
        "echo",
        echo,
        "echo",
        [
            TextDelta("Echo: "),
            TextDelta("hi"),
            Usage(input_tokens=1, output_tokens=2),
            Stop("end_turn"),
        ],
        tool_reply(
            "echo-call-1",
            ['{"path": "src/app.py", "limit": 200}'],
            READ_APP,
            Usage(input_tokens=13, output_tokens=12),  # a token per four characters
        ),
        tool_prompt='@tool read_file {"path": "src/app.py", "limit": 200}',
        not_applicable=LOCAL,
    ),
    Case(
        "demo-plugin",
        demo_plugin,
        "demo-1",
        [
            *(TextDelta(word) for word in ("Hello, ", "you ", "said: ", "hi ")),
            Usage(input_tokens=1, output_tokens=5),
            Stop("end_turn"),
        ],
        None,
        not_applicable={**LOCAL, "tool_call": "the demo provider answers with text only"},
    ),
]


def cases(behaviour: str) -> list[Any]:
    """Every provider, with those the behaviour cannot apply to skipped, saying why."""
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.skip(reason=f"{case.id} {case.not_applicable[behaviour]}")]
            if behaviour in case.not_applicable
            else [],
        )
        for case in CASES
    ]


def serve(case: Case, response: httpx.Response) -> respx.Route:
    return respx.post(case.http.url).mock(return_value=response)


def error(
    case: Case, status: int, body: object, headers: Mapping[str, str] | None = None
) -> respx.Route:
    return serve(case, httpx.Response(status, json=body, headers=headers))


# --- replies ------------------------------------------------------------------------------


@respx.mock
@pytest.mark.parametrize("case", cases("text"))
async def test_a_plain_text_reply_streams_text_deltas_then_usage_then_end_turn(case: Case) -> None:
    if case.wire is not None:
        serve(case, case.wire.stream(case.wire.events(case.wire.text_stream))[0])

    events = await collect(case.make(), case.request())

    assert events == case.text


@respx.mock
@pytest.mark.parametrize("case", cases("tool_call"))
async def test_a_tool_call_streams_its_start_argument_deltas_and_end_then_stops_for_tool_use(
    case: Case,
) -> None:
    if case.wire is not None:
        serve(case, case.wire.stream(case.wire.events(case.wire.tool_stream))[0])

    events = await collect(case.make(), case.request(case.tool_prompt))

    assert [event for event in events if not isinstance(event, ThinkingDelta)] == case.tool


# --- errors -------------------------------------------------------------------------------


@respx.mock
@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("case", cases("refused"))
async def test_refused_credentials_are_an_auth_error_naming_the_variable_never_the_key(
    case: Case, status: int
) -> None:
    wire = case.http
    error(case, status, wire.errors.auth(f"Incorrect API key provided: {KEY}."))

    with pytest.raises(AuthError) as caught:
        await collect(case.make(), case.request())

    message = str(caught.value)
    assert f"the API refused the key from {wire.key_variable} (HTTP {status})" in message
    assert wire.fix in message
    assert KEY not in message
    assert KEY[:12] not in message
    assert not caught.value.retryable


@respx.mock
@pytest.mark.parametrize(
    ("hint", "delay"), [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500"}, 1.5)]
)
@pytest.mark.parametrize("case", cases("rate_limited"))
async def test_a_429_is_a_rate_limit_error_carrying_the_servers_delay(
    case: Case, hint: dict[str, str], delay: float
) -> None:
    message = "Rate limit reached for tokens per min (TPM): Limit 30000. Please try again in 7s."
    error(case, 429, case.http.errors.rate_limit(message), hint)

    with pytest.raises(RateLimitError) as caught:
        await collect(case.make(), case.request())

    assert f"rate limited (HTTP 429): {message}" in str(caught.value)
    assert caught.value.retry_after == delay
    assert caught.value.retryable


@respx.mock
@pytest.mark.parametrize("status", [500, 502, 503, 529])
@pytest.mark.parametrize("case", cases("server_error"))
async def test_a_server_error_or_overload_is_unavailable_retryable_with_the_servers_hint(
    case: Case, status: int
) -> None:
    errors = case.http.errors
    body = errors.overloaded("Overloaded") if status == 529 else errors.server("Overloaded")
    route = error(case, status, body, {"retry-after": "3"})

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(case.make(), case.request())

    assert f"(HTTP {status}): Overloaded" in str(caught.value)
    assert caught.value.retryable
    assert caught.value.retry_after == 3.0
    assert route.call_count == 1  # no retries of the vendor's client: the shared wrapper's job


@respx.mock
@pytest.mark.parametrize("case", cases("overflow"))
async def test_a_context_length_error_is_a_context_window_error(case: Case) -> None:
    body, message = case.http.errors.overflow()
    error(case, 400, body)

    with pytest.raises(ContextWindowError) as caught:
        await collect(case.make(), case.request())

    assert str(caught.value) == (
        f"{caught.value.provider}: the conversation is too long for the model: {message}"
    )


# --- the stream and the connection --------------------------------------------------------


DROPS: dict[str, tuple[BaseException | None, str]] = {
    "cut-short": (None, "stream ended before the model finished"),
    "connection-lost": (
        httpx.RemoteProtocolError("peer closed connection without sending complete message"),
        "failed: peer closed connection",
    ),
    "timed-out": (
        httpx.ReadTimeout("The read operation timed out"),
        "no response within 600s (raise providers.",
    ),
}


@respx.mock
@pytest.mark.parametrize("how", sorted(DROPS))
@pytest.mark.parametrize("case", cases("dropped"))
async def test_a_stream_dropped_mid_way_is_unavailable_and_retryable_after_what_came(
    case: Case, how: str
) -> None:
    wire = case.http
    sent, deltas = wire.cut
    then, expected = DROPS[how]
    response, body = wire.stream(wire.events(wire.text_stream, sent), then=then)
    serve(case, response)
    seen: list[StreamEvent] = []

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(case.make(), case.request(), into=seen)

    assert expected in str(caught.value)
    assert caught.value.retryable
    assert seen == case.text[:deltas]
    assert body.closed


@respx.mock
@pytest.mark.parametrize("case", cases("closed"))
async def test_leaving_the_stream_early_closes_the_http_response(case: Case) -> None:
    wire = case.http
    response, body = wire.stream(wire.events(wire.text_stream))
    serve(case, response)

    async with case.make().stream(case.request()) as events:
        assert await anext(aiter(events)) == case.text[0]
        assert not body.closed

    assert body.closed


@respx.mock
@pytest.mark.parametrize("case", cases("closed"))
async def test_cancelling_a_stream_that_went_silent_closes_the_http_response(case: Case) -> None:
    wire = case.http
    sent, deltas = wire.cut
    response, body = wire.stream(wire.events(wire.text_stream, sent), hang=True)
    serve(case, response)
    seen: list[StreamEvent] = []

    async def consume() -> None:
        await collect(case.make(), case.request(), into=seen)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            await body.silent.wait()
            group.cancel_scope.cancel()

    assert seen == case.text[:deltas]
    assert body.closed
