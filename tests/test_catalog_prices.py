"""Prices at a local address: a server on this machine (Ollama, LM Studio, vLLM) costs
nothing, but a vendor's provider type at a local address is a proxy or a tunnel to that
vendor's paid API (LiteLLM, an SSH tunnel), priced as the vendor prices the model;
`prices = 0` in the config keeps it free, and `acp-agent models` says which rule applied."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acp_agent.catalog import LOCAL_SERVER_NOTE, lookup, with_catalog
from acp_agent.config import (
    AgentConfig,
    AnthropicProviderConfig,
    ModelConfig,
    OpenAIProviderConfig,
    Prices,
    load_config,
)

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
LITELLM = "http://localhost:4000/v1"


def one_provider(provider: OpenAIProviderConfig | AnthropicProviderConfig) -> AgentConfig:
    return AgentConfig(providers={"proxy": provider})


def only_model(config: AgentConfig) -> ModelConfig:
    ((_, _, model),) = config.model_choices()
    return model


def test_an_openai_provider_at_a_local_proxy_gets_openais_prices() -> None:
    paid = lookup("gpt-4.1", "openai")
    config = one_provider(
        OpenAIProviderConfig(type="openai", base_url=LITELLM, models=(ModelConfig(id="gpt-4.1"),))
    )

    model = only_model(with_catalog(config))

    assert paid.prices is not None
    assert model.prices == paid.prices
    assert model.sources["prices"] == "genai-prices openai/gpt-4.1"
    (note,) = model.notes
    assert "a proxy or tunnel to openai's paid API" in note


def test_an_anthropic_provider_through_a_tunnel_gets_anthropics_prices() -> None:
    config = one_provider(
        AnthropicProviderConfig(
            type="anthropic",
            base_url="http://127.0.0.1:8082",
            models=(ModelConfig(id="claude-sonnet-4-5"),),
        )
    )

    model = only_model(with_catalog(config))

    assert model.prices == lookup("claude-sonnet-4-5", "anthropic").prices
    assert model.prices is not None and model.prices.input > 0


def test_a_model_the_vendor_does_not_sell_stays_free_at_a_local_address() -> None:
    config = one_provider(
        OpenAIProviderConfig(type="openai", base_url=LITELLM, models=(ModelConfig(id="llama3"),))
    )

    model = only_model(with_catalog(config))

    assert model.prices is None
    assert model.notes == ("a local address, and openai sells no model 'llama3': no prices",)


def test_an_openai_compatible_server_on_this_machine_stays_free_even_for_a_paid_model_id() -> None:
    config = one_provider(
        OpenAIProviderConfig(
            type="openai-compatible", base_url=LITELLM, models=(ModelConfig(id="gpt-4.1"),)
        )
    )

    model = only_model(with_catalog(config))

    assert model.prices is None
    assert model.sources["prices"] == "default"
    assert model.notes == (LOCAL_SERVER_NOTE,)


def test_prices_of_zero_in_the_config_keep_a_proxied_model_free() -> None:
    free = Prices(input=0, output=0)
    config = one_provider(
        OpenAIProviderConfig(
            type="openai", base_url=LITELLM, models=(ModelConfig(id="gpt-4.1", prices=free),)
        )
    )

    model = only_model(with_catalog(config))

    assert model.prices == free
    assert model.sources["prices"] == "config"
    assert model.notes == ()


@pytest.mark.parametrize("starter", ["ollama.toml", "lmstudio.toml", "vllm.toml"])
def test_the_local_server_starters_stay_free(starter: str) -> None:
    config = with_catalog(load_config(str(CONFIGS / starter), {}))

    for _, _, model in config.model_choices():
        assert model.prices is None, model.id
        assert LOCAL_SERVER_NOTE in model.notes


def test_the_facts_cache_keeps_each_address_apart(tmp_path: Path) -> None:
    cache = tmp_path / "model-facts.json"

    def proxied(base_url: str | None) -> ModelConfig:
        provider = OpenAIProviderConfig(
            type="openai-compatible", base_url=base_url, models=(ModelConfig(id="gpt-4.1"),)
        )
        return only_model(with_catalog(one_provider(provider), cache_file=cache))

    local, remote = proxied(LITELLM), proxied("https://api.example.com/v1")
    again_local, again_remote = proxied(LITELLM), proxied("https://api.example.com/v1")

    assert cache.exists()
    assert local.prices is None and remote.prices is not None
    assert (again_local.prices, again_remote.prices) == (local.prices, remote.prices)
    assert again_local.notes == local.notes == (LOCAL_SERVER_NOTE,)


def test_models_says_which_price_rule_applied(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        f"""[providers.proxy]
type = "openai"
base_url = "{LITELLM}"
api_key = "sk-test-proxy-key"
models = [{{ id = "gpt-4.1" }}, {{ id = "gpt-4.1-mini", prices = {{ input = 0, output = 0 }} }}]

[providers.ollama]
type = "openai-compatible"
base_url = "http://localhost:11434/v1"
models = [{{ id = "llama3.2" }}]
""",
        encoding="utf-8",
    )

    shown = subprocess.run(
        [sys.executable, "-m", "acp_agent", "models", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout

    proxied, free, local = (
        block(shown, name) for name in ("proxy/gpt-4.1 ", "proxy/gpt-4.1-mini", "ollama/llama3.2")
    )
    assert "$2.00 in, $8.00 out per 1M" in proxied[0]
    assert "a proxy or tunnel to openai's paid API" in proxied[-1]
    assert "prices: config" in free[1]
    assert len(free) == 2  # no note: the config's prices need no rule
    assert "note: a local server: no prices" in local[-1]


def block(shown: str, model: str) -> list[str]:
    """The lines `acp-agent models` shows for one model: its line, then its indented ones."""
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip(" *").startswith(model))
    rest = [line for line in lines[start + 1 :]]
    end = next((i for i, line in enumerate(rest) if not line.startswith("      ")), len(rest))
    return [lines[start], *rest[:end]]
