"""A key stored by `acp-agent login` is each provider's last resort, and the errors about keys
name `acp-agent login` as a way to fix them."""

from __future__ import annotations

from typing import Any

import pytest
import respx
from provider_support import collector, sent_body, sse

from acp_agent.config import AgentConfig as Config
from acp_agent.config import (
    AnthropicProviderConfig,
    ModelConfig,
    OpenAIProviderConfig,
    with_stored_keys,
)
from acp_agent.messages import Message, TextPart
from acp_agent.providers import AuthError, ModelRequest, create_provider

pytestmark = pytest.mark.anyio

STORED = "sk-stored-9f8e7d6c5b4a39281706f5e4"
ENV_KEY = "sk-env-1a2b3c4d5e6f7a8b9c0d1e2f"
OPENAI_URL = "https://api.openai.com/v1/chat/completions"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


def openai_provider(env: dict[str, str], stored: dict[str, str], **settings: Any) -> Any:
    provider = OpenAIProviderConfig(type="openai", models=(ModelConfig(id="gpt-4.1"),), **settings)
    with_stored_keys(Config(providers={"openai": provider}), stored)
    return create_provider("openai", provider, env)


def anthropic_provider(env: dict[str, str], stored: dict[str, str]) -> Any:
    provider = AnthropicProviderConfig(
        type="anthropic", models=(ModelConfig(id="claude-sonnet-4-6"),), prompt_caching=False
    )
    with_stored_keys(Config(providers={"anthropic": provider}), stored)
    return create_provider("anthropic", provider, env)


def request(model: str) -> ModelRequest:
    return ModelRequest(model=model, system="", messages=[Message("user", [TextPart("hi")])])


@respx.mock
async def test_openai_sends_the_stored_key_when_the_environment_has_none() -> None:
    route = respx.post(OPENAI_URL).mock(return_value=sse("openai_text.sse"))
    provider = openai_provider({}, {"openai": STORED})
    try:
        await collector(request("gpt-4.1"))(provider)
    finally:
        await provider.aclose()
    assert route.calls.last.request.headers["authorization"] == f"Bearer {STORED}"
    assert sent_body(route)["model"] == "gpt-4.1"


@respx.mock
async def test_openai_prefers_the_environment_over_the_stored_key() -> None:
    route = respx.post(OPENAI_URL).mock(return_value=sse("openai_text.sse"))
    provider = openai_provider({"OPENAI_API_KEY": ENV_KEY}, {"openai": STORED})
    try:
        await collector(request("gpt-4.1"))(provider)
    finally:
        await provider.aclose()
    assert route.calls.last.request.headers["authorization"] == f"Bearer {ENV_KEY}"


@respx.mock
async def test_anthropic_sends_the_stored_key_when_the_environment_has_none() -> None:
    route = respx.post(ANTHROPIC_URL).mock(return_value=sse("anthropic_text.sse"))
    provider = anthropic_provider({}, {"anthropic": STORED})
    try:
        await collector(request("claude-sonnet-4-6"))(provider)
    finally:
        await provider.aclose()
    headers = route.calls.last.request.headers
    # The SDK sends `x-api-key`, or (newer ones) the key as a bearer token.
    assert STORED in (headers.get("x-api-key"), headers.get("authorization", "")[7:])


@pytest.mark.parametrize("make", [openai_provider, anthropic_provider], ids=["openai", "anthropic"])
async def test_a_missing_key_names_acp_agent_login(make: Any) -> None:
    provider = make({}, {})
    model = "gpt-4.1" if make is openai_provider else "claude-sonnet-4-6"
    with pytest.raises(AuthError) as caught:
        await collector(request(model))(provider)
    assert f"acp-agent login {provider.name}" in str(caught.value)
    assert "login button" in str(caught.value)


@respx.mock
async def test_a_refused_stored_key_asks_to_log_in_again_and_is_never_quoted() -> None:
    refused = {
        "error": {
            "message": f"Incorrect API key provided: {STORED[:8]}****{STORED[-4:]}.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    respx.post(OPENAI_URL).respond(401, json=refused)
    provider = openai_provider({}, {"openai": STORED})
    try:
        with pytest.raises(AuthError) as caught:
            await collector(request("gpt-4.1"))(provider)
    finally:
        await provider.aclose()
    message = str(caught.value)
    assert "`acp-agent login openai` replaces the stored key" in message
    assert "`acp-agent login`" in message
    assert STORED not in message
