"""The models an editor's gateway offers, for a provider the editor adds with
`providers/set` (an id we do not have): its model list, asked once with exactly the
editor's headers.

OpenAI-style gateways answer `GET {baseUrl}/models` with `{"data": [{"id": ...}]}`;
Anthropic-style ones `GET {baseUrl}/v1/models` (their base URL is the API root, as for
`/v1/messages`) with `{"data": [{"id", "display_name", ...}], "has_more": ...}`, of which
the first page of up to 1000 is read. Any failure is `ModelListUnavailable` with a reason
fit for the log: the caller falls back to the configured models. Never a header in it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

MAX_MODELS = 200
"""More than any picker shows usefully; a gateway listing thousands is cut here."""


class ModelListUnavailable(Exception):
    """The gateway gave no usable model list; the message says why (no secrets)."""


@dataclass(frozen=True, slots=True)
class GatewayModel:
    id: str
    name: str | None = None
    """The gateway's display name (Anthropic's `display_name`), if it gave one."""


async def gateway_models(
    api_type: str, base_url: str, headers: Mapping[str, str]
) -> list[GatewayModel]:
    """The models the gateway at `base_url` lists (the caller bounds the wait)."""
    url, sent = _request(api_type, base_url, headers)
    try:
        # No redirects: the editor's credentials are for this gateway, not another host.
        async with httpx2.AsyncClient(follow_redirects=False) as client:
            response = await client.get(url, headers=sent)
    except httpx2.HTTPError as exc:
        raise ModelListUnavailable(f"GET {url}: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise ModelListUnavailable(f"GET {url}: HTTP {response.status_code}")
    try:
        return _models(json.loads(response.content))
    except ValueError as exc:
        raise ModelListUnavailable(f"GET {url}: {exc}") from None


def _request(
    api_type: str, base_url: str, headers: Mapping[str, str]
) -> tuple[str, dict[str, str]]:
    root = base_url.rstrip("/")
    sent = {"Accept": "application/json"}
    if api_type == "anthropic":
        from .anthropic import API_VERSION

        sent["anthropic-version"] = API_VERSION  # required; the editor's own one wins
        sent.update(headers)
        return f"{root}/v1/models?limit=1000", sent
    sent.update(headers)
    return f"{root}/models", sent


def _models(body: Any) -> list[GatewayModel]:
    """The listed models, in the gateway's order, without repeats; `ValueError` for a body
    that is not such a list (or lists none)."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError("the answer has no `data` list")
    models: dict[str, GatewayModel] = {}
    for item in data:
        model_id = item.get("id") if isinstance(item, dict) else None
        if isinstance(model_id, str) and _short_line(model_id) and model_id not in models:
            name = item.get("display_name")
            models[model_id] = GatewayModel(model_id, name if _short_line(name) else None)
    if not models:
        raise ValueError("the list names no model")
    return list(models.values())[:MAX_MODELS]


def _short_line(value: Any) -> bool:
    """A model id or name we can show and send back: short, printable, one line."""
    return isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable()
