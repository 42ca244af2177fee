"""Choosing a provider from its config, and keeping vendor SDKs out of the import path."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from acp_agent.config import EchoProviderConfig, ModelConfig, OpenAIProviderConfig, ProviderConfig
from acp_agent.providers import create_provider, provider_module_for
from acp_agent.providers.echo import EchoProvider
from acp_agent.providers.openai_chat import OpenAIChatProvider
from acp_agent.providers.retry import RetryingProvider

OPENAI = OpenAIProviderConfig(type="openai", models=(ModelConfig(id="gpt-4.1"),))
LOCAL = OpenAIProviderConfig(
    type="openai-compatible",
    base_url="http://localhost:11434/v1",
    models=(ModelConfig(id="qwen3:8b"),),
)


def test_importing_the_package_does_not_import_a_vendor_sdk() -> None:
    code = (
        "import sys, acp_agent.providers\n"
        "loaded = [m for m in ('openai', 'httpx2', 'pydantic') if m in sys.modules]\n"
        "print(','.join(loaded))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )

    assert result.stdout.strip() == ""


@pytest.mark.parametrize(
    ("config", "cls"),
    [
        (EchoProviderConfig(type="echo"), EchoProvider),
        (OPENAI, OpenAIChatProvider),
        (LOCAL, OpenAIChatProvider),
    ],
    ids=["echo", "openai", "openai-compatible"],
)
def test_each_config_type_gets_its_provider_from_the_module_named_for_it_wrapped_in_retries(
    config: ProviderConfig, cls: type
) -> None:
    provider = create_provider("main", config, {})

    assert isinstance(provider, RetryingProvider)
    inner = provider.inner
    assert isinstance(inner, cls)
    assert provider.name == inner.name == "main"
    assert type(inner).__module__ == provider_module_for(config)
    importlib.import_module(provider_module_for(config))


def test_creating_an_openai_provider_without_a_key_defers_the_error_to_the_first_call() -> None:
    # Sessions can list and pick models before the key is set; the call reports it.
    assert create_provider("openai", OPENAI, {}).name == "openai"
