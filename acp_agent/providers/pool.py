"""The configured providers, created on first use and closed at shutdown."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import anyio.to_thread

from . import create_provider, provider_module_for
from .base import Provider
from .errors import ProviderError
from .routing import Routing, routed

if TYPE_CHECKING:
    from ..config import AgentConfig

log = logging.getLogger(__name__)

KeyState = Literal["key", "missing", "not_needed", "unknown"]
_DEFAULT_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "azure-openai": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
"""The variable each vendor's provider reads when the config names none (as the providers
do; not imported from them: that would load their SDKs)."""


class ProviderPool:
    def __init__(self, config: AgentConfig, env: Mapping[str, str]) -> None:
        self._config = config
        self._env = env
        self._providers: dict[str, Provider] = {}
        self._retired: list[Provider] = []
        self._routes: dict[str, Routing] = {}
        """The editor's routing (`providers/set`) by provider name: this process only."""
        self._disabled: set[str] = set()
        """Providers the editor turned off (`providers/disable`): never sent to."""

    def routing(self, name: str) -> Routing | None:
        return self._routes.get(name)

    def route(self, name: str, routing: Routing) -> None:
        """Send `name`'s requests where the editor says from the next request on; a turn
        streaming from the old provider finishes there (it is closed at shutdown)."""
        routed(self._config.providers[name], routing)  # refuses what cannot be routed
        self._routes[name] = routing
        self._disabled.discard(name)
        if (old := self._providers.pop(name, None)) is not None:
            self._retired.append(old)

    def disable(self, name: str) -> None:
        self._disabled.add(name)

    def enabled(self, name: str) -> bool:
        """False for a provider the editor turned off: whatever would use it (a stored
        session's model, the title or subagent model) takes another."""
        return name not in self._disabled

    async def get(self, name: str) -> Provider:
        """The provider configured as `providers.<name>`, routed where the editor said."""
        if name in self._disabled:
            # A session stored on it and opened again since: the editor said not to use it.
            raise ProviderError(
                name, f"provider {name} was disabled by the editor; choose another model"
            )
        provider = self._providers.get(name)
        if provider is None:
            config = self._config.providers[name]
            if (routing := self._routes.get(name)) is not None:
                config = routed(config, routing)
            # A vendor SDK takes a second or two to import: not on the loop, where it would
            # stall every other session's stream and cancel.
            await anyio.to_thread.run_sync(importlib.import_module, provider_module_for(config))
            provider = self._providers.setdefault(name, create_provider(name, config, self._env))
        return provider

    def key_state(self, name: str) -> KeyState:
        """Whether `providers.<name>` has what it signs in with, as far as can be told
        without a request: a key (the config's, the environment's, a stored one, or the
        editor's routing), none it needs (echo; an OpenAI-compatible server, which is sent a
        placeholder), or cloud credentials and plugins, which only a request tells."""
        if name in self._routes:
            return "key"
        config = self._config.providers[name]
        if config.type == "echo":
            return "not_needed"
        resolve = getattr(config, "resolve_api_key", None)
        stored = getattr(config, "stored_key", None)
        default_variable = _DEFAULT_KEY_VARIABLES.get(config.type)
        if (
            (resolve is not None and resolve(self._env))
            or (stored is not None and stored())
            or (default_variable is not None and self._env.get(default_variable))
        ):
            return "key"
        if config.type == "openai-compatible":
            return "not_needed"
        return "missing" if config.type in _DEFAULT_KEY_VARIABLES else "unknown"

    def forget_keys(self) -> None:
        """The stored keys changed (a logout): every provider is made anew on next use, and
        reads its key again. The old ones are closed at shutdown, not now: a running turn
        may still be streaming from one."""
        self._retired.extend(self._providers.values())
        self._providers = {}

    async def aclose(self) -> None:
        """Release every provider's HTTP client."""
        providers, self._providers = [*self._retired, *self._providers.values()], {}
        self._retired = []
        for provider in providers:
            try:
                await provider.aclose()
            except Exception:
                log.exception("closing provider %s failed", provider.name)
