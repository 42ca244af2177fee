"""Model providers: the neutral conversation in, neutral stream events out.

Importing this package is cheap: each provider module loads inside `create_provider`, and
can be warmed up in a background thread with `provider_module_for`. The OpenAI and direct
Anthropic providers send with httpx2 and never import their vendor SDK; only Bedrock,
Vertex and the rarer Responses API events load one (`_openai_sdk`, `_anthropic_sdk`, the
only modules that import an SDK), off the event loop.

Provider types beyond the built-in ones come from installed plugins (`acp_agent.plugins`):
`create_provider` hands their sections to the plugin's `create`, and a plugin that failed
to load becomes a provider whose every call says why (`_unusable`).
"""

from __future__ import annotations

import logging
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
    from ..config import PluginProviderConfig, ProviderConfig

log = logging.getLogger(__name__)

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
    module = _MODULES.get(config.type)
    if module is not None:
        return module
    from .. import plugins
    from ..config import PluginProviderConfig

    # A plugin's own module (imported already, when its config was validated); this
    # package for one that failed to load, whose provider only reports why.
    installed = plugins.find(config.type)
    usable = isinstance(config, PluginProviderConfig) and config.load_error is None
    return installed.module if installed is not None and usable else __name__


def create_provider(name: str, config: ProviderConfig, env: Mapping[str, str]) -> Provider:
    """The provider configured as `providers.<name>`; `env` supplies API-key variables.

    Every provider comes wrapped in a `retry.RetryingProvider` following `config.retry`.
    """
    from .retry import RetryingProvider

    provider = _create_unwrapped(name, config, env)
    return RetryingProvider(provider, config.retry, system=_SYSTEMS.get(config.type, config.type))


_SYSTEMS = {
    "anthropic-bedrock": "aws.bedrock",
    "anthropic-vertex": "gcp.vertex_ai",
    "azure-openai": "azure.ai.openai",
}
"""The GenAI conventions' `gen_ai.provider.name` where it is not the provider type."""


def _create_unwrapped(name: str, config: ProviderConfig, env: Mapping[str, str]) -> Provider:
    # Imported here: config.py loads pydantic, which must not slow down importing this package.
    from ..config import (
        AnthropicProviderConfig,
        EchoProviderConfig,
        OpenAIProviderConfig,
        PluginProviderConfig,
    )

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
        case PluginProviderConfig():
            return _plugin_provider(name, config, env)
        case _:
            assert_never(config)


def _plugin_provider(name: str, config: PluginProviderConfig, env: Mapping[str, str]) -> Provider:
    """A provider from an installed plugin; a broken plugin becomes a provider whose every
    call fails saying why, so it never takes the other providers down with it."""
    from .. import plugins
    from ._unusable import Unusable

    if config.load_error is not None:
        return Unusable(name, config.load_error)
    try:
        plugin = plugins.load(config.type)
        provider = plugin.create(name, config, env)
    except plugins.PluginError as exc:
        return Unusable(name, str(exc))
    except Exception as exc:  # a plugin's bug while creating its provider
        log.warning("provider plugin %r: create() failed", config.type, exc_info=True)
        return Unusable(name, f"plugin {config.type!r} failed to create the provider: {exc}")
    return provider
