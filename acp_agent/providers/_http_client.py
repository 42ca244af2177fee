"""Requests sent with httpx2 itself, the HTTP client the vendor SDKs are built on.

The OpenAI and Anthropic SDKs cost a second or more of imports before their first request;
every stream is parsed raw already (`_wire`), so the direct APIs are called without them:
one pooled `httpx2.AsyncClient` per provider, which, as the SDKs' clients do, follows
redirects, takes proxies and certificates from the environment (httpx's default) and gives
every phase the configured timeout. An error status is read whole and raised as
`HttpStatusError`, which each vendor turns into the error table's `Failure`
(`_error_table`); what the vendor's error body says is read by `error_body`.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Mapping

import httpx2

from .. import __version__

USER_AGENT = f"acp-agent/{__version__}"


def json_headers() -> dict[str, str]:
    """What every request to a vendor's JSON API carries, as the SDKs' clients send it (their
    telemetry headers aside), before any credentials."""
    return {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
    }


class HttpStatusError(Exception):
    """A response with an error status (400 or above), its body read and the response
    closed."""

    def __init__(self, response: httpx2.Response, body: bytes) -> None:
        super().__init__(f"HTTP {response.status_code} from {response.request.url}")
        self.status = response.status_code
        self.headers = response.headers
        self.url = str(response.request.url)
        self.text = body.decode(errors="replace").strip()


TRANSPORT_ERRORS = (HttpStatusError, httpx2.HTTPError, json.JSONDecodeError)
"""What sending and streaming raise: an error status, the transport's failures, and a
stream event that is not JSON (from `_wire.loads`)."""


def new_client(timeout: float) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(timeout), follow_redirects=True, transport=TlsWhenNeeded()
    )


@functools.cache
def verified_tls() -> ssl.SSLContext:
    """The TLS context httpx would make (certifi's CAs, `SSL_CERT_FILE`/`SSL_CERT_DIR`
    honoured), made once for every provider: loading the CAs costs 20-40 ms a time."""
    return httpx2.create_ssl_context(verify=True, trust_env=True)


class TlsWhenNeeded(httpx2.AsyncBaseTransport):
    """The transport httpx would make, with its TLS set up on the first `https` request
    instead of with the client: a provider on `http://localhost` (Ollama, vLLM, a
    LiteLLM proxy) never waits for the CAs to load before its first request.

    Plain `http` requests go through a pool whose TLS context trusts no one, so that it
    fails closed should it ever be asked for TLS."""

    def __init__(self) -> None:
        self._plain: httpx2.AsyncHTTPTransport | None = None
        self._tls: httpx2.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.scheme == "https":
            if self._tls is None:
                self._tls = httpx2.AsyncHTTPTransport(verify=verified_tls())
            return await self._tls.handle_async_request(request)
        if self._plain is None:
            self._plain = httpx2.AsyncHTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
        return await self._plain.handle_async_request(request)

    async def aclose(self) -> None:
        for transport in (self._plain, self._tls):
            if transport is not None:
                await transport.aclose()


async def post_stream(
    client: httpx2.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    content: bytes,
    params: Mapping[str, str] | None = None,
) -> httpx2.Response:
    """POST `content`; the response comes back unread, to stream its bytes, or raises
    `HttpStatusError` for an error status."""
    request = client.build_request("POST", url, headers=headers, content=content, params=params)
    response = await client.send(request, stream=True)
    if response.status_code >= 400:
        try:
            body = await response.aread()
        finally:
            await response.aclose()
        raise HttpStatusError(response, body)
    return response


def error_body(error: HttpStatusError) -> tuple[object, str]:
    """The error body (its JSON value, else the text) and the message the SDKs would give
    it when it names none: "Error code: 429 - {...}"."""
    if not error.text:
        return None, f"Error code: {error.status}"
    try:
        body: object = json.loads(error.text)
    except ValueError:
        return error.text, error.text
    return body, f"Error code: {error.status} - {body}"
