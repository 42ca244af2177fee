"""Where the editor routes a provider (ACP `providers/set`), for this process only.

A `Routing` replaces a configured provider's base URL and credentials: requests go to the
editor's gateway with exactly the editor's headers and no key of ours. It lives in the
`ProviderPool` of one connection and is never written anywhere (the headers may be
secrets).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import ModelConfig, ProviderConfig
    from ._error_table import Endpoint

API_TYPES = {
    "openai": ("openai",),
    "openai-compatible": ("openai",),
    "azure-openai": ("azure",),
    "anthropic": ("anthropic",),
    "anthropic-bedrock": ("bedrock",),
    "anthropic-vertex": ("vertex",),
}
"""The ACP `LlmProtocol`s each provider type speaks. `echo` speaks none: it sends nothing
anywhere, so there is nothing to route; plugin types are not known to speak any."""

ROUTABLE = frozenset({"openai", "azure", "anthropic"})
"""The protocols we can send over plain HTTP with only the editor's headers. Bedrock and
Vertex go through their cloud SDKs, which sign with cloud credentials of their own."""


NEW_PROVIDER_TYPES = {"openai": "openai-compatible", "anthropic": "anthropic"}
"""The provider type a provider the editor adds (`providers/set` of an id we do not have)
is made as, by the protocol it speaks: the ones that need nothing beyond a URL and the
editor's headers (Azure wants deployments and an API version, Bedrock and Vertex cloud
credentials)."""


@dataclass(frozen=True, slots=True)
class Routing:
    api_type: str
    base_url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # secrets: not in repr


def supported(config: ProviderConfig) -> tuple[str, ...]:
    return API_TYPES.get(config.type, ())


def routed(config: ProviderConfig, routing: Routing) -> ProviderConfig:
    """`config` sending to the editor's gateway: its base URL, its headers, none of our keys
    (neither the config's, the environment's nor a stored one)."""
    from ..config import AnthropicProviderConfig, OpenAIProviderConfig

    if not isinstance(config, OpenAIProviderConfig | AnthropicProviderConfig):
        raise ValueError(f"a {config.type} provider cannot be routed")
    copy = config.model_copy(
        update={"base_url": routing.base_url, "api_key": None, "api_key_env": None}
    )
    copy._editor_headers = dict(routing.headers)
    copy._stored_key = None
    return copy


def new_section(api_type: str, base_url: str, models: tuple[ModelConfig, ...]) -> ProviderConfig:
    """The section of a provider the editor adds: no key of ours, ever (it is routed)."""
    from ..config import AnthropicProviderConfig, OpenAIProviderConfig

    provider_type = NEW_PROVIDER_TYPES[api_type]
    if provider_type == "anthropic":
        return AnthropicProviderConfig(type="anthropic", base_url=base_url, models=models)
    return OpenAIProviderConfig(type="openai-compatible", base_url=base_url, models=models)


def gateway_refusal(base_url: str) -> tuple[str, str]:
    """What a 401 from the editor's gateway refused, and the fix: the editor's settings,
    not a key variable of ours (none was sent)."""
    return (
        f"the headers the editor routed this provider with (gateway {base_url})",
        "the editor's gateway refused them: check the provider settings in the editor "
        "(ACP providers/set)",
    )


VENDOR_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "anthropic-bedrock": "Amazon Bedrock",
    "anthropic-vertex": "Google Vertex AI",
}
"""Where a provider without `base_url` sends, as `providers/list` shows it."""


def configured_url(config: ProviderConfig) -> str:
    return getattr(config, "base_url", None) or VENDOR_URLS.get(config.type, "")


OwnCredentials = Callable[[], tuple[str, str, str | None]]
"""A provider's own credentials, as a refusal names them: which they are, the fix, the key."""


def provider_endpoint(
    name: str,
    base_url: str,
    timeout: float,
    editor_headers: dict[str, str] | None,
    own: OwnCredentials,
    *,
    api_prefix: str = "",
    not_found_hint: str | None = None,
) -> Endpoint:
    """The provider as its failures name it. Routed by the editor, a refusal names the
    gateway's headers (no key of ours was sent) and masks their credential like a key;
    otherwise it names what `own` says."""
    from ._error_table import Endpoint  # its HTTP client's import waits for a provider's use

    if editor_headers is not None:
        credentials, fix = gateway_refusal(base_url)
        key = header_secret(editor_headers)
    else:
        credentials, fix, key = own()
    return Endpoint(name, base_url, timeout, credentials, fix, key, api_prefix, not_found_hint)


def header_secret(headers: dict[str, str] | None) -> str | None:
    """The credential among the editor's headers that a refusing server may quote back (as
    OpenAI's 401 quotes the key): masked in its messages like a key of ours."""
    for name, value in (headers or {}).items():
        if name.lower() in ("authorization", "api-key", "x-api-key"):
            return value.removeprefix("Bearer ").strip() or None
    return None
