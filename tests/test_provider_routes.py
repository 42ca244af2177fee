"""A provider the editor adds (`providers/set` of an id the config does not have): its
models come from its gateway's model list (fake OpenAI and Anthropic servers on
127.0.0.1), else from the configuration's models of that protocol; what we cannot build
is refused with the field named, and nothing changes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import anyio
import pytest
from fake_anthropic import FakeAnthropic
from fake_llm import FakeLLM

from acp_agent.config import (
    AgentConfig,
    AnthropicProviderConfig,
    ModelConfig,
    OpenAIProviderConfig,
)
from acp_agent.protocol.providers import SetProvider
from acp_agent.provider_routes import ProviderRoutes, RouteError
from acp_agent.providers.pool import ProviderPool

pytestmark = pytest.mark.anyio

SECRET = "gw-secret-5d1e"
HEADERS = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture
def gateway() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def routes(*, with_anthropic: bool = True) -> ProviderRoutes:
    """`main` (OpenAI-compatible, the default) and, unless told, `claude` (Anthropic)."""
    providers: dict[str, OpenAIProviderConfig | AnthropicProviderConfig] = {
        "main": OpenAIProviderConfig(
            type="openai-compatible",
            base_url="http://127.0.0.1:9/v1",
            models=(ModelConfig(id="fake-model", context_window=12_345),),
        )
    }
    if with_anthropic:
        providers["claude"] = AnthropicProviderConfig(
            type="anthropic", models=(ModelConfig(id="claude-x"),)
        )
    config = AgentConfig(providers=providers)  # type: ignore[arg-type]
    return ProviderRoutes(config, ProviderPool(config, {}))


def offered(table: ProviderRoutes, provider: str) -> list[str]:
    return [choice for choice, _, _ in table.config.model_choices() if choice.startswith(provider)]


async def test_a_new_provider_offers_the_models_its_gateway_lists_asked_with_the_editors_headers(
    gateway: FakeLLM,
) -> None:
    gateway.model_list = ["gw-large", "fake-model", "gw-large", "", "bad\nid"]
    table = routes()
    await table.set(SetProvider("air", "openai", gateway.base_url, HEADERS))

    assert offered(table, "air/") == ["air/gw-large", "air/fake-model"]
    (asked,) = gateway.exchanges
    assert (asked.method, asked.path) == ("GET", "/v1/models")
    assert asked.headers["authorization"] == f"Bearer {SECRET}"
    # A model the configuration has keeps what the configuration says of it.
    assert table.config.find_model("air/fake-model")[2].context_window == 12_345
    (air,) = [p for p in table.listing() if p["providerId"] == "air"]
    assert air == {
        "providerId": "air",
        "supported": ["openai"],
        "required": False,
        "current": {"apiType": "openai", "baseUrl": gateway.base_url},
    }
    assert table.routed("air") and SECRET not in repr(table.config)


async def test_an_anthropic_gateway_is_asked_at_v1_models_with_an_api_version() -> None:
    table = routes()
    with FakeAnthropic() as gateway:
        await table.set(SetProvider("air", "anthropic", gateway.base_url, {"x-api-key": SECRET}))
        (asked,) = gateway.exchanges
    assert asked.path.startswith("/v1/models")
    assert asked.headers["x-api-key"] == SECRET and asked.headers["anthropic-version"]
    _, section, model = table.config.find_model("air/claude-fake")
    assert (section.type, model.name) == ("anthropic", "Claude Fake")


async def test_a_gateway_without_a_model_list_offers_the_configurations_models_of_its_protocol(
    gateway: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    gateway.model_list = None
    table = routes()
    with caplog.at_level(logging.INFO):
        await table.set(SetProvider("air", "openai", gateway.base_url, HEADERS))
    assert offered(table, "air/") == ["air/fake-model"]
    assert "HTTP 404" in caplog.text and "air" in caplog.text
    assert SECRET not in caplog.text


async def test_a_silent_model_list_does_not_hold_the_set_past_its_timeout(
    gateway: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    gateway.model_list_gate = release = threading.Event()
    table = routes()
    table.models_timeout = 0.3
    try:
        with anyio.fail_after(5), caplog.at_level(logging.INFO):
            await table.set(SetProvider("air", "openai", gateway.base_url, HEADERS))
    finally:
        release.set()
    assert offered(table, "air/") == ["air/fake-model"]
    assert "no answer within 0.3s" in caplog.text and SECRET not in caplog.text


async def test_setting_an_added_provider_again_makes_it_anew(gateway: FakeLLM) -> None:
    table = routes()
    await table.set(SetProvider("air", "openai", gateway.base_url, HEADERS))
    with FakeAnthropic() as other:
        await table.set(SetProvider("air", "anthropic", other.base_url, {"x-api-key": SECRET}))
        other_url = other.base_url
    assert offered(table, "air/") == ["air/claude-fake"]
    routing = table.pool.routing("air")
    assert routing is not None and (routing.api_type, routing.base_url) == ("anthropic", other_url)


@pytest.mark.parametrize(
    ("provider_id", "api_type", "field"),
    [
        ("air", "azure", "apiType"),
        ("air", "bedrock", "apiType"),
        ("a/b", "openai", "providerId"),
        ("", "openai", "providerId"),
        ("main", "anthropic", "apiType"),  # configured: it speaks openai only
    ],
)
async def test_what_cannot_be_built_is_refused_naming_the_field_and_nothing_changes(
    gateway: FakeLLM, provider_id: str, api_type: str, field: str
) -> None:
    table = routes()
    before = table.listing()
    with pytest.raises(RouteError, match=f"^{field}:"):
        await table.set(SetProvider(provider_id, api_type, gateway.base_url, HEADERS))
    assert table.listing() == before and not gateway.exchanges


async def test_no_model_list_and_no_configured_models_of_that_protocol_is_refused(
    gateway: FakeLLM,
) -> None:
    gateway.model_list = None
    table = routes(with_anthropic=False)
    before = table.listing()
    with FakeAnthropic() as other:
        other_url = other.base_url
    # Nothing listens there any more: no model list, and no anthropic model configured.
    with pytest.raises(RouteError, match=r"^providerId: .*no anthropic models"):
        await table.set(SetProvider("air", "anthropic", other_url, HEADERS))
    assert table.listing() == before and "air" not in table.config.providers
