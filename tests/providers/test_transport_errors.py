"""What every HTTP provider says when the exchange itself goes wrong: a local server that is
not running, a URL that is not the API (404), a key that is refused (401), a `200` that is
not an event stream; and how many times each is tried."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import httpx
import pytest
import respx
from provider_support import collect, sse

from acp_agent.config import (
    AnthropicProviderConfig,
    ModelConfig,
    OpenAIProviderConfig,
    RetryConfig,
)
from acp_agent.messages import Message, RetryNotice, TextPart
from acp_agent.providers import (
    AuthError,
    ModelRequest,
    Provider,
    ProviderError,
    ProviderUnavailable,
)
from acp_agent.providers.anthropic import AnthropicProvider
from acp_agent.providers.errors import NotListening
from acp_agent.providers.openai_chat import OpenAIChatProvider
from acp_agent.providers.retry import RetryingProvider

pytestmark = pytest.mark.anyio

KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
HELLO = ModelRequest(model="m", system="", messages=[Message("user", [TextPart("hi")])])
HTML = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in - Corporate Proxy</title></head>\n"
    b"<body>Please sign in</body></html>\n"
)


def openai(env: dict[str, str] | None = None, **config: Any) -> OpenAIChatProvider:
    settings: dict[str, Any] = {"type": "openai", "models": (ModelConfig(id="m"),)}
    settings.update(config)
    return OpenAIChatProvider("openai", OpenAIProviderConfig(**settings), env or {})


def responses(env: dict[str, str] | None = None, **config: Any) -> OpenAIChatProvider:
    return openai(env, models=(ModelConfig(id="m", api="responses"),), **config)


def anthropic(env: dict[str, str] | None = None, **config: Any) -> AnthropicProvider:
    settings: dict[str, Any] = {"type": "anthropic", "models": (ModelConfig(id="m"),)}
    settings.update(config)
    return AnthropicProvider("claude", AnthropicProviderConfig(**settings), env or {})


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def retrying(provider: Provider, sleeps: Sleeps) -> RetryingProvider:
    return RetryingProvider(provider, RetryConfig(max_attempts=5), sleep=sleeps, jitter=lambda: 0.5)


def refused() -> httpx.ConnectError:
    """A refused connection as respx raises it (respx replaces the cause, so the words
    tell; a real one carries `ConnectionRefusedError` as its cause: see the loopback test)."""
    return httpx.ConnectError("[Errno 111] Connection refused")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --- a local server that is not running ---------------------------------------------------


@respx.mock
async def test_a_refused_loopback_server_fails_at_once_without_retries() -> None:
    route = respx.post("http://127.0.0.1:11434/v1/chat/completions").mock(side_effect=refused())
    sleeps = Sleeps()
    provider = retrying(openai(base_url="http://127.0.0.1:11434/v1"), sleeps)

    with pytest.raises(NotListening) as caught:
        await collect(provider, HELLO)

    assert str(caught.value) == (
        "openai: nothing is listening at http://127.0.0.1:11434/v1 — is the server running?"
    )
    assert route.call_count == 1
    assert sleeps.waits == []


@respx.mock
@pytest.mark.parametrize(
    "base_url", ["http://localhost:1234/v1", "http://192.168.1.20:8000/v1", "http://[::1]:8080/v1"]
)
async def test_a_refused_private_or_local_address_fails_at_once(base_url: str) -> None:
    route = respx.post(f"{base_url}/chat/completions").mock(side_effect=refused())

    with pytest.raises(NotListening, match="is the server running"):
        await collect(retrying(openai(base_url=base_url), Sleeps()), HELLO)

    assert route.call_count == 1


@respx.mock
async def test_a_refused_public_host_is_still_retried() -> None:
    route = respx.post("https://llm.example.com/v1/chat/completions").mock(side_effect=refused())
    sleeps = Sleeps()
    provider = retrying(
        openai({"OPENAI_API_KEY": KEY}, base_url="https://llm.example.com/v1"), sleeps
    )
    events: list[Any] = []

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(provider, HELLO, into=events)

    assert not isinstance(caught.value, NotListening)
    assert route.call_count == 5
    assert len(sleeps.waits) == 4
    assert [type(event) for event in events] == [RetryNotice] * 4


@respx.mock
async def test_a_refused_local_anthropic_proxy_fails_at_once() -> None:
    route = respx.post("http://localhost:4000/v1/messages").mock(side_effect=refused())

    with pytest.raises(NotListening, match=r"nothing is listening at http://localhost:4000 "):
        await collect(
            retrying(
                anthropic({"ANTHROPIC_API_KEY": KEY}, base_url="http://localhost:4000"), Sleeps()
            ),
            HELLO,
        )

    assert route.call_count == 1


async def test_a_real_refused_connection_on_loopback_is_recognised() -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    provider = retrying(openai(base_url=base_url), Sleeps())
    try:
        with pytest.raises(NotListening, match=f"nothing is listening at {base_url} "):
            await collect(provider, HELLO)
    finally:
        await provider.aclose()


# --- no key for a local server ------------------------------------------------------------


@respx.mock
async def test_an_openai_provider_at_a_local_url_needs_no_key_and_logs_the_placeholder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    route = respx.post("http://localhost:11434/v1/chat/completions").mock(
        return_value=sse("openai_text.sse")
    )
    caplog.set_level(logging.INFO, logger="acp_agent")

    await collect(openai(base_url="http://localhost:11434/v1"), HELLO)

    assert route.calls.last.request.headers["authorization"] == "Bearer not-needed"
    logged = [record.getMessage() for record in caplog.records]
    assert any(
        "OPENAI_API_KEY is not set" in line
        and "http://localhost:11434/v1 is a local server" in line
        and "placeholder" in line
        for line in logged
    ), logged


async def test_an_openai_provider_at_a_public_url_still_needs_a_key() -> None:
    with pytest.raises(AuthError, match="OPENAI_API_KEY is not set"):
        await collect(openai(base_url="https://llm.example.com/v1"), HELLO)


# --- 404 ----------------------------------------------------------------------------------


@respx.mock
async def test_a_404_names_the_url_and_suggests_the_v1_suffix() -> None:
    respx.post("http://localhost:11434/chat/completions").mock(
        return_value=httpx.Response(404, text="404 page not found")
    )

    with pytest.raises(ProviderError) as caught:
        await collect(openai(base_url="http://localhost:11434"), HELLO)

    assert str(caught.value) == (
        "openai: HTTP 404 from http://localhost:11434/chat/completions: 404 page not found. "
        'OpenAI-compatible servers serve the API under /v1: try base_url = "http://localhost:11434/v1".'
    )
    assert not caught.value.retryable


@respx.mock
async def test_a_404_from_anthropic_with_v1_in_base_url_says_to_drop_it() -> None:
    respx.post("http://localhost:4000/v1/v1/messages").mock(
        return_value=httpx.Response(404, json={"detail": "Not Found"})
    )

    with pytest.raises(ProviderError) as caught:
        await collect(
            anthropic({"ANTHROPIC_API_KEY": KEY}, base_url="http://localhost:4000/v1"), HELLO
        )

    message = str(caught.value)
    assert "HTTP 404 from http://localhost:4000/v1/v1/messages" in message
    assert 'base_url should not end with it: try base_url = "http://localhost:4000"' in message


# --- 401 ----------------------------------------------------------------------------------


@respx.mock
async def test_a_401_names_the_variable_the_key_came_from_never_the_key() -> None:
    respx.post("https://api.openai.com/v1/chat/completions").mock(
        return_value=httpx.Response(401, json={"error": {"message": f"Incorrect API key {KEY}"}})
    )

    with pytest.raises(AuthError) as caught:
        await collect(openai({"WORK_KEY": KEY}, api_key_env="WORK_KEY"), HELLO)

    message = str(caught.value)
    assert message.startswith("openai: the API refused the key from WORK_KEY (HTTP 401)")
    assert KEY not in message


@respx.mock
async def test_a_401_from_a_local_server_says_the_placeholder_was_refused() -> None:
    respx.post("http://localhost:8000/v1/chat/completions").mock(
        return_value=httpx.Response(401, json={"error": "unauthorized"})
    )

    with pytest.raises(AuthError) as caught:
        await collect(openai(type="openai-compatible", base_url="http://localhost:8000/v1"), HELLO)

    message = str(caught.value)
    assert "refused the placeholder key sent because none is configured" in message
    assert "providers.openai.api_key_env" in message


# --- a 200 that is not an event stream ------------------------------------------------------


@respx.mock
@pytest.mark.parametrize(
    ("make", "url"),
    [
        pytest.param(
            lambda: openai({"OPENAI_API_KEY": KEY}),
            "https://api.openai.com/v1/chat/completions",
            id="chat",
        ),
        pytest.param(
            lambda: responses({"OPENAI_API_KEY": KEY}),
            "https://api.openai.com/v1/responses",
            id="responses",
        ),
        pytest.param(
            lambda: anthropic({"ANTHROPIC_API_KEY": KEY}),
            "https://api.anthropic.com/v1/messages",
            id="anthropic",
        ),
    ],
)
async def test_an_html_page_instead_of_a_stream_fails_at_once_saying_what_came(
    make: Any, url: str
) -> None:
    route = respx.post(url).mock(
        return_value=httpx.Response(
            200, headers={"content-type": "text/html; charset=utf-8"}, content=HTML
        )
    )
    sleeps = Sleeps()

    with pytest.raises(ProviderError) as caught:
        await collect(retrying(make(), sleeps), HELLO)

    message = str(caught.value)
    assert f"{url} answered HTTP 200 with text/html; charset=utf-8, not an event stream" in message
    assert "it began: '<!DOCTYPE html>'" in message
    assert "proxy or a login page" in message
    assert not caught.value.retryable
    assert route.call_count == 1
    assert sleeps.waits == []


@respx.mock
async def test_a_whole_json_answer_instead_of_a_stream_fails_quoting_its_first_line() -> None:
    respx.post("http://localhost:8000/v1/chat/completions").mock(
        return_value=httpx.Response(200, json={"id": "chatcmpl-1", "choices": []})
    )

    with pytest.raises(ProviderError) as caught:
        await collect(openai(base_url="http://localhost:8000/v1"), HELLO)

    message = str(caught.value)
    assert "with application/json, not an event stream" in message
    assert '\'{"id":"chatcmpl-1","choices":[]}\'' in message


@respx.mock
async def test_an_event_stream_without_its_content_type_still_streams() -> None:
    body = sse("openai_text.sse").content
    respx.post("http://localhost:8000/v1/chat/completions").mock(
        return_value=httpx.Response(200, headers={"content-type": "text/plain"}, content=body)
    )

    events = await collect(openai(base_url="http://localhost:8000/v1"), HELLO)

    assert events


# --- cloud credentials --------------------------------------------------------------------


@respx.mock
async def test_bedrock_without_aws_credentials_says_which_variables_or_profile_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    pytest.importorskip("boto3")
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    provider = anthropic(type="anthropic-bedrock", region="us-east-1")

    with pytest.raises(AuthError) as caught:
        await collect(retrying(provider, Sleeps()), HELLO)

    message = str(caught.value)
    assert message.startswith("claude: no AWS credentials found")
    for fix in (
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
    ):
        assert fix in message
    assert not respx.calls
