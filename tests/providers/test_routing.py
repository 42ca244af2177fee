"""A provider the editor routed (`providers/set`): the pool sends its requests to the
editor's gateway with exactly the editor's headers and none of our keys (respx mocks)."""

from __future__ import annotations

import httpx
import pytest
import respx
from provider_support import collect, sse

from acp_agent.config import AgentConfig, AnthropicProviderConfig, ModelConfig
from acp_agent.messages import Message, TextPart
from acp_agent.providers import AuthError, ModelRequest, ProviderError
from acp_agent.providers.pool import ProviderPool
from acp_agent.providers.routing import Routing

pytestmark = pytest.mark.anyio

OUR_KEY = "sk-ant-ours-0123456789abcdef0123456789"
EDITOR_KEY = "gw-secret-abcdef0123456789"
GATEWAY = "https://gateway.editor.example/anthropic"
HELLO = ModelRequest(model="claude-x", system="", messages=[Message("user", [TextPart("hi")])])


def pool() -> ProviderPool:
    section = AnthropicProviderConfig(
        type="anthropic",
        api_key_env="MY_ANTHROPIC_KEY",
        models=(ModelConfig(id="claude-x", context_window=200_000),),
        prompt_caching=False,
    )
    return ProviderPool(AgentConfig(providers={"claude": section}), {"MY_ANTHROPIC_KEY": OUR_KEY})


def vendor_and_gateway() -> tuple[respx.Route, respx.Route]:
    """Anthropic's own Messages endpoint and the editor's gateway's, both answering."""
    return answering("https://api.anthropic.com"), answering(GATEWAY)


def answering(root: str) -> respx.Route:
    return respx.post(f"{root}/v1/messages").mock(return_value=sse("anthropic_text.sse"))


@respx.mock
async def test_a_routed_provider_sends_the_editors_headers_and_no_key_of_ours() -> None:
    ours, gateway = vendor_and_gateway()
    providers = pool()
    await collect(await providers.get("claude"), HELLO)
    assert ours.calls.last.request.headers["authorization"] == f"Bearer {OUR_KEY}"

    providers.route("claude", Routing("anthropic", GATEWAY, {"x-api-key": EDITOR_KEY}))
    await collect(await providers.get("claude"), HELLO)
    sent = gateway.calls.last.request.headers
    assert sent["x-api-key"] == EDITOR_KEY
    assert "authorization" not in sent and OUR_KEY not in str(sent.raw)
    assert ours.call_count == 1
    await providers.aclose()


@respx.mock
async def test_a_refusal_from_the_gateway_names_the_gateway_and_masks_the_editors_key() -> None:
    body = {"type": "error", "error": {"type": "authentication_error", "message": EDITOR_KEY}}
    respx.post(f"{GATEWAY}/v1/messages").mock(return_value=httpx.Response(401, json=body))
    providers = pool()
    providers.route("claude", Routing("anthropic", GATEWAY, {"x-api-key": EDITOR_KEY}))
    with pytest.raises(AuthError) as refused:
        await collect(await providers.get("claude"), HELLO)
    message = str(refused.value)
    assert GATEWAY in message and "editor" in message
    assert "MY_ANTHROPIC_KEY" not in message and EDITOR_KEY not in message
    await providers.aclose()


@respx.mock
async def test_a_disabled_provider_is_never_sent_to_until_the_editor_routes_it_again() -> None:
    ours, gateway = vendor_and_gateway()
    providers = pool()
    providers.disable("claude")
    with pytest.raises(ProviderError, match="disabled by the editor"):
        await providers.get("claude")
    providers.route("claude", Routing("anthropic", GATEWAY, {"x-api-key": EDITOR_KEY}))
    await collect(await providers.get("claude"), HELLO)
    assert (ours.call_count, gateway.call_count) == (0, 1)
    await providers.aclose()
