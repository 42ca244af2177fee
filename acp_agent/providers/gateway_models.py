"""The models an editor's gateway offers, for a provider the editor adds with
`providers/set` (an id we do not have): its model list, asked once with exactly the
editor's headers.

OpenAI-style gateways answer `GET {baseUrl}/models` with `{"data": [{"id": ...}]}`;
Anthropic-style ones `GET {baseUrl}/v1/models` (their base URL is the API root, as for
`/v1/messages`) with `{"data": [{"id", "display_name", ...}], "has_more": ...}`, of which
the first page of up to 1000 is read. Any failure is `ModelListUnavailable` with a reason
fit for the log: the caller falls back to the configured models. Never a header in it, nor
the URL's user info or query (either may carry a credential).

The gateway is not trusted to be sane: at most `MAX_BODY_BYTES` are read (counted after
decompression, which is ours so that a small compressed answer cannot grow past it), a
redirect is not followed, and a body that is not such a list, however malformed or
deeply nested, is a failure like any other. The caller bounds the whole wait.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2

MAX_MODELS = 200
"""More than any picker shows usefully; a gateway listing thousands is cut here."""
MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest model list we read: the biggest real ones (OpenRouter's, with every
model's description and prices) are a few MB; past this the configured models are offered."""


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
    shown = f"GET {_shown(url)}"
    try:
        # No redirects: the editor's credentials are for this gateway, not another host.
        async with (
            httpx2.AsyncClient(follow_redirects=False) as client,
            client.stream("GET", url, headers=sent) as response,
        ):
            if response.status_code != 200:
                raise ModelListUnavailable(f"{shown}: {_status(response.status_code)}")
            body = await _capped_body(response)
    except httpx2.HTTPError as exc:
        raise ModelListUnavailable(f"{shown}: {type(exc).__name__}") from None
    except _Unreadable as exc:
        raise ModelListUnavailable(f"{shown}: {exc}") from None
    try:
        return _models(json.loads(body))
    except RecursionError:
        raise ModelListUnavailable(f"{shown}: the answer is nested too deeply") from None
    except ValueError as exc:
        raise ModelListUnavailable(f"{shown}: {_first_line(exc)}") from None


class _Unreadable(Exception):
    """A body we will not read through (too large, encoded as we did not ask)."""


async def _capped_body(response: httpx2.Response) -> bytearray:
    """The body, read raw and decompressed here, up to `MAX_BODY_BYTES`; `_Unreadable`
    past it, before reading more (a `Content-Length` over it is not read at all)."""
    too_large = f"the answer is larger than {MAX_BODY_BYTES // (1024 * 1024)} MB"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _Unreadable(too_large)
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("identity", "gzip", "deflate"):
        raise _Unreadable(f"the answer is encoded as {encoding[:40]!r}, which we did not ask for")
    # wbits 47: a gzip or zlib header, whichever came.
    inflate = None if encoding == "identity" else zlib.decompressobj(47)
    body = bytearray()
    async for raw in response.aiter_raw():
        if inflate is None:
            body += raw
        else:
            try:
                body += inflate.decompress(raw, MAX_BODY_BYTES + 1 - len(body))
            except zlib.error:
                raise _Unreadable("the compressed answer is corrupt") from None
            if inflate.unconsumed_tail:
                raise _Unreadable(too_large)
        if len(body) > MAX_BODY_BYTES:
            raise _Unreadable(too_large)
    return body  # json.loads takes it as it is: no copy


def _status(code: int) -> str:
    if 300 <= code < 400:
        return f"HTTP {code}, a redirect (not followed: the editor's headers are for this URL)"
    return f"HTTP {code}"


def _shown(url: str) -> str:
    """The URL for the log: without user info or query, either of which may be a secret."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def _first_line(exc: ValueError) -> str:
    """A parse error's reason, short (a decode error may quote the bytes it stopped at)."""
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _request(
    api_type: str, base_url: str, headers: Mapping[str, str]
) -> tuple[str, dict[str, str]]:
    root = base_url.rstrip("/")
    sent = {"Accept": "application/json"}
    if api_type == "anthropic":
        from .anthropic import API_VERSION

        sent["anthropic-version"] = API_VERSION  # required; the editor's own one wins
        url = f"{root}/v1/models?limit=1000"
    else:
        url = f"{root}/models"
    sent.update(headers)
    # Ours wins here: we decompress only these (`_capped_body`).
    for name in [name for name in sent if name.lower() == "accept-encoding"]:
        del sent[name]
    sent["Accept-Encoding"] = "gzip, deflate"
    return url, sent


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
