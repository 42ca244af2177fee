"""The unstable `providers/*` requests (the editor routes our LLM traffic), read as plain
JSON with the schema's rules (`SetProviderRequest`, `DisableProviderRequest`) and the
checks a bad value would otherwise pass on to an HTTP request: a well-known `apiType`, an
http(s) `baseUrl`, headers that are strings without line breaks.

`headers` may carry secrets: no error message quotes a header's value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .fields import Invalid, obj, text

KNOWN_API_TYPES = frozenset({"openai", "anthropic", "azure", "vertex", "bedrock"})
"""The schema's `LlmProtocol`s; custom ones (`_...`) name nothing we could speak."""


@dataclass(frozen=True, slots=True)
class SetProvider:
    provider_id: str
    api_type: str
    base_url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class DisableProvider:
    provider_id: str


@dataclass(frozen=True, slots=True)
class ListProviders:
    pass


def list_providers(params: dict[str, Any]) -> ListProviders:
    return ListProviders()


def disable_provider(params: dict[str, Any]) -> DisableProvider:
    return DisableProvider(text(params, "providerId"))


def set_provider(params: dict[str, Any]) -> SetProvider:
    provider_id = text(params, "providerId")
    api_type = text(params, "apiType")
    if api_type not in KNOWN_API_TYPES:
        known = ", ".join(sorted(KNOWN_API_TYPES))
        raise Invalid(f"apiType: unknown protocol {api_type!r} (known: {known})")
    base_url = text(params, "baseUrl")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or _breaks(base_url):
        raise Invalid(f"baseUrl: must be an http(s) URL, got {base_url[:200]!r}")
    raw = params.get("headers")
    headers = {} if raw is None else _headers(obj(raw, "headers"))
    return SetProvider(provider_id, api_type, base_url, headers)


def _headers(raw: dict[str, Any]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in raw.items():
        if not name or _breaks(name) or ":" in name or name != name.strip():
            raise Invalid(f"headers: {name[:100]!r} is not a header name")
        if not isinstance(value, str):
            raise Invalid(f"headers.{name}: must be a string")
        if _breaks(value):  # the value itself is not quoted: it may be a secret
            raise Invalid(f"headers.{name}: the value contains a line break or NUL")
        headers[name] = value
    return headers


def _breaks(value: str) -> bool:
    return any(c in value for c in "\r\n\0")
