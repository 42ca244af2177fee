"""The editor's say over where our LLM traffic goes (unstable ACP `providers/*`): what
`providers/list` shows, and which configured providers the model picker still offers.

Process-scoped: the routes live in the connection's `ProviderPool`, the disabled set
here, and a provider the editor adds joins this process's configuration (`config`, which
every room reads); nothing is persisted (the editor's headers may be secrets).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from .config import AgentConfig, ModelConfig, ProviderConfig
from .protocol.providers import SetProvider
from .providers.pool import ProviderPool
from .providers.routing import (
    NEW_PROVIDER_TYPES,
    ROUTABLE,
    Routing,
    configured_url,
    new_section,
    supported,
)

log = logging.getLogger(__name__)

MODELS_TIMEOUT = 5.0
"""Seconds a gateway has to list its models before a provider the editor adds is offered
the configuration's models instead: `providers/set` waits for no longer."""
_NEW_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A provider id we can put in 'provider/model' choices and log lines."""


class RouteError(ValueError):
    """A `providers/*` request we refuse (invalid params); nothing changed."""


@dataclass
class ProviderRoutes:
    config: AgentConfig
    pool: ProviderPool
    disabled: set[str] = field(default_factory=set)
    added: set[str] = field(default_factory=set)
    """Providers the editor added (`providers/set` of an id the config did not have)."""
    models_timeout: float = MODELS_TIMEOUT

    def required(self) -> str:
        """The default model's provider: sessions fall back to it, so it stays."""
        return self.config.default_choice.split("/", 1)[0]

    def listing(self) -> list[dict[str, Any]]:
        # Providers that speak no ACP protocol (echo, plugins) are left out: listed, their
        # `current` would have to be null, which tells the editor they are disabled.
        infos = []
        for name, provider in self.config.providers.items():
            protocols = supported(provider)
            if not protocols:
                continue
            current: dict[str, Any] | None = None
            if name not in self.disabled:
                routing = self.pool.routing(name)
                current = (
                    {"apiType": routing.api_type, "baseUrl": routing.base_url}
                    if routing is not None
                    else {"apiType": protocols[0], "baseUrl": configured_url(provider)}
                )
            infos.append(
                {
                    "providerId": name,
                    "supported": list(protocols),
                    "required": name == self.required(),
                    "current": current,
                }
            )
        return infos

    async def set(self, request: SetProvider) -> None:
        """Route a configured provider to the editor's gateway, or add the one the editor
        names (an id we do not have, or one it added before: made anew)."""
        provider = self.config.providers.get(request.provider_id)
        if provider is None or request.provider_id in self.added:
            await self._add(request)
            return
        if not supported(provider):
            raise RouteError(
                f"providerId: {request.provider_id!r} ({provider.type}) speaks no protocol "
                "the editor can route"
            )
        if request.api_type not in supported(provider):
            raise RouteError(
                f"apiType: provider {request.provider_id!r} speaks "
                f"{', '.join(supported(provider))}, not {request.api_type!r}"
            )
        if request.api_type not in ROUTABLE:
            raise RouteError(
                f"apiType: {request.api_type!r} goes through its cloud SDK's own credentials, "
                "which cannot be routed"
            )
        self._route(request)

    async def _add(self, request: SetProvider) -> None:
        """A provider of the editor's own: its models from the gateway's list, else the
        configuration's models of that protocol."""
        name = request.provider_id
        if not _NEW_ID.fullmatch(name):
            raise RouteError(
                f"providerId: {name[:100]!r} cannot name a new provider (up to 64 letters, "
                "digits, '.', '_' or '-')"
            )
        if request.api_type not in NEW_PROVIDER_TYPES:
            raise RouteError(
                f"apiType: a provider the editor adds ({name!r} is not configured) speaks "
                f"{' or '.join(NEW_PROVIDER_TYPES)}, not {request.api_type!r}"
            )
        models = await self._gateway_models(request) or self._configured_models(request.api_type)
        if not models:
            raise RouteError(
                f"providerId: {name!r} is not configured, its gateway lists no models and the "
                f"configuration has no {request.api_type} models to offer through it"
            )
        section = new_section(request.api_type, request.base_url, models)
        if any(not model.sources for model in models):
            section = await anyio.to_thread.run_sync(_with_catalog_facts, name, section)
        self.config.providers[name] = section  # the config every room reads: the picker too
        self.added.add(name)
        self._route(request)

    def _route(self, request: SetProvider) -> None:
        routing = Routing(request.api_type, request.base_url, dict(request.headers))
        try:
            self.pool.route(request.provider_id, routing)
        except ValueError as exc:
            raise RouteError(str(exc)) from None
        self.disabled.discard(request.provider_id)

    async def _gateway_models(self, request: SetProvider) -> tuple[ModelConfig, ...]:
        """The models the gateway lists (the configuration's facts for one it also has);
        none when it lists none, or not in time (the set goes on without them)."""
        # Here, not at start-up: it loads the HTTP client, which a new session waits for.
        from .providers.gateway_models import ModelListUnavailable, gateway_models

        try:
            with anyio.fail_after(self.models_timeout):
                listed = await gateway_models(request.api_type, request.base_url, request.headers)
        except (ModelListUnavailable, TimeoutError) as exc:
            why = str(exc) or f"no answer within {self.models_timeout:g}s"
            log.warning(
                "providers/set: %s: the gateway's model list is unavailable (%s); offering "
                "the configuration's %s models",
                request.provider_id,
                why,
                request.api_type,
            )
            return ()
        known = {model.id: model for model in self._configured_models(request.api_type)}
        return tuple(
            known.get(model.id) or ModelConfig(id=model.id, name=model.name) for model in listed
        )

    def _configured_models(self, api_type: str) -> tuple[ModelConfig, ...]:
        """Every configured model of a provider speaking `api_type`, each id once."""
        models: dict[str, ModelConfig] = {}
        for name, provider in self.config.providers.items():
            if name not in self.added and api_type in supported(provider):
                for model in provider.models:
                    models.setdefault(model.id, model)
        return tuple(models.values())

    def disable(self, provider_id: str) -> bool:
        """True when the picker changed (a known, enabled provider went)."""
        if provider_id not in self.config.providers or provider_id in self.disabled:
            return False  # idempotent, as the spec asks
        if provider_id == self.required():
            raise RouteError(
                f"providerId: {provider_id!r} is required (the default model's provider)"
            )
        self.disabled.add(provider_id)
        self.pool.disable(provider_id)
        return True

    def usable(self, choice: str) -> bool:
        return choice.split("/", 1)[0] not in self.disabled

    def offers(self, choice: str) -> bool:
        """The picker has `choice`: configured (a provider the editor added anew may list
        other models now) and not disabled."""
        try:
            self.config.find_model(choice)
        except ValueError:
            return False
        return self.usable(choice)

    def offered(self) -> AgentConfig:
        """The config the model picker shows: without the disabled providers."""
        if not self.disabled:
            return self.config
        kept = {n: p for n, p in self.config.providers.items() if n not in self.disabled}
        return self.config.model_copy(update={"providers": kept})

    def routed(self, provider_id: str) -> bool:
        return self.pool.routing(provider_id) is not None


def _with_catalog_facts(name: str, section: ProviderConfig) -> ProviderConfig:
    """The gateway's models with what the catalogs know of them (context windows, prices;
    the configuration's models have theirs already); the catalogs load here, off the
    event loop."""
    from .catalog import FactsCache, complete

    known = FactsCache({}, "")
    completed = tuple(
        model if model.sources else complete(model, section, name, known)
        for model in section.models
    )
    return section.model_copy(update={"models": completed})
