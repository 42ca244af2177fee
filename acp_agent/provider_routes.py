"""The editor's say over where our LLM traffic goes (unstable ACP `providers/*`): what
`providers/list` shows, and which configured providers the model picker still offers.

Process-scoped: the routes live in the connection's `ProviderPool`, the disabled set
here; nothing is persisted (the editor's headers may be secrets).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import AgentConfig
from .protocol.providers import SetProvider
from .providers.pool import ProviderPool
from .providers.routing import ROUTABLE, Routing, configured_url, supported


class RouteError(ValueError):
    """A `providers/*` request we refuse (invalid params); nothing changed."""


@dataclass
class ProviderRoutes:
    config: AgentConfig
    pool: ProviderPool
    disabled: set[str] = field(default_factory=set)

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

    def set(self, request: SetProvider) -> None:
        provider = self.config.providers.get(request.provider_id)
        if provider is None or not supported(provider):
            known = ", ".join(p["providerId"] for p in self.listing())
            raise RouteError(
                f"providerId: unknown provider {request.provider_id!r} (known: {known})"
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
        routing = Routing(request.api_type, request.base_url, dict(request.headers))
        try:
            self.pool.route(request.provider_id, routing)
        except ValueError as exc:
            raise RouteError(str(exc)) from None
        self.disabled.discard(request.provider_id)

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

    def offered(self) -> AgentConfig:
        """The config the model picker shows: without the disabled providers."""
        if not self.disabled:
            return self.config
        kept = {n: p for n, p in self.config.providers.items() if n not in self.disabled}
        return self.config.model_copy(update={"providers": kept})

    def routed(self, provider_id: str) -> bool:
        return self.pool.routing(provider_id) is not None
