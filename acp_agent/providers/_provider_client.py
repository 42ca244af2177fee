"""The skeleton the Anthropic and OpenAI providers share: one pooled HTTP client per provider,
made on the first request with the headers of our own key or, when the editor routes the
provider (`providers/set`), exactly the editor's headers and no key of ours; and the
endpoint their failures name (`routing.provider_endpoint`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import httpx2

from ._http_client import new_client
from .routing import OwnCredentials, provider_endpoint

if TYPE_CHECKING:
    from ._error_table import Endpoint


class ClientSettings(Protocol):
    """What the skeleton reads of a provider's config section."""

    @property
    def timeout(self) -> float: ...

    def editor_headers(self) -> dict[str, str] | None: ...


Config = TypeVar("Config", bound=ClientSettings)


class ProviderClient(ABC, Generic[Config]):
    """A provider's client and key: what `client()` needs, each vendor says in
    `_request_headers` and `_api_key`."""

    def __init__(self, name: str, config: Config, env: Mapping[str, str]) -> None:
        self.name = name
        self.config = config
        self._env = env
        self._key: str | None = None
        self._key_origin: str | None = None
        """Where the key came from (a variable's name, the config key), to name it when it
        is refused; None while no key of ours is known."""
        self._http: httpx2.AsyncClient | None = None
        self._headers: dict[str, str] = {}

    def client(self) -> httpx2.AsyncClient:
        """The client, made on first use (a missing key raises `AuthError` here)."""
        if self._http is None:
            if (routed := self.config.editor_headers()) is not None:
                # Routed by the editor: exactly its headers, no key of ours.
                self._headers = {**self._request_headers(None), **routed}
            else:
                self._key = self._api_key()
                self._headers = self._request_headers(self._key)
            self._http = new_client(self.config.timeout)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    def _endpoint_at(
        self,
        base_url: str,
        own: OwnCredentials,
        *,
        api_prefix: str = "",
        not_found_hint: str | None = None,
    ) -> Endpoint:
        """The provider as its failures name it: `own` says which key of ours was sent."""
        return provider_endpoint(
            self.name,
            base_url,
            self.config.timeout,
            self.config.editor_headers(),
            own,
            api_prefix=api_prefix,
            not_found_hint=not_found_hint,
        )

    @abstractmethod
    def _request_headers(self, key: str | None) -> dict[str, str]:
        """What every request carries; no credentials when `key` is None (routed)."""

    @abstractmethod
    def _api_key(self) -> str:
        """Our key, noting in `_key_origin` where it came from; `AuthError` when none."""
