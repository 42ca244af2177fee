"""Model providers: the neutral conversation in, neutral stream events out.

Importing this package is cheap: each provider module (and its vendor SDK) loads inside
`create_provider`, so the server can answer `initialize` before `openai` is imported, and
can warm the module up in a background thread with `provider_module_for`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, assert_never

from .base import ModelRequest, Provider
from .errors import (
    AuthError,
    ContextWindowError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
)

if TYPE_CHECKING:
    from ..config import ProviderConfig

__all__ = [
    "AuthError",
    "ContextWindowError",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "ProviderUnavailable",
    "RateLimitError",
    "create_provider",
    "provider_module_for",
]

_MODULES = {
    "echo": "acp_agent.providers.echo",
    "openai": "acp_agent.providers.openai_chat",
    "openai-compatible": "acp_agent.providers.openai_chat",
    "azure-openai": "acp_agent.providers.openai_chat",
    "anthropic": "acp_agent.providers.anthropic",
    "anthropic-bedrock": "acp_agent.providers.anthropic",
    "anthropic-vertex": "acp_agent.providers.anthropic",
}


def provider_module_for(config: ProviderConfig) -> str:
    """The dotted name of the module that implements `config`, to import ahead of use."""
    return _MODULES[config.type]


def create_provider(name: str, config: ProviderConfig, env: Mapping[str, str]) -> Provider:
    """The provider configured as `providers.<name>`; `env` supplies API-key variables.

    Every provider comes wrapped in a `retry.RetryingProvider` following `config.retry`.
    """
    from .retry import RetryingProvider

    return RetryingProvider(_create_unwrapped(name, config, env), config.retry)


def _create_unwrapped(name: str, config: ProviderConfig, env: Mapping[str, str]) -> Provider:
    # Imported here: config.py loads pydantic, which must not slow down importing this package.
    from ..config import AnthropicProviderConfig, EchoProviderConfig, OpenAIProviderConfig

    match config:
        case EchoProviderConfig():
            from .echo import EchoProvider

            return EchoProvider(name, config)
        case OpenAIProviderConfig():
            # All three types; the provider picks Chat Completions or Responses per model.
            from .openai_chat import OpenAIChatProvider

            return OpenAIChatProvider(name, config, env)
        case AnthropicProviderConfig():
            from .anthropic import AnthropicProvider

            return AnthropicProvider(name, config, env)
        case _:
            assert_never(config)
