"""One GET of web_fetch: through the proxy the child environment names, or straight to an
address that was judged, its body read up to a cap.

Proxies come from the child environment only (`ToolContext.child_env`): `http_proxy`,
`https_proxy`, `all_proxy` and `no_proxy`, lower case first as curl reads them, then upper
case. httpx's own `trust_env` would read the agent's environment, so it is off: nothing else
of ours (certificate paths, `.netrc`) reaches the request either.

Without a proxy the request connects to the address given (the one web_fetch judged) while
the URL, the Host header and the TLS server name keep the host name, so certificates are
checked against the name as usual. Through a proxy, the proxy resolves the name.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

import httpx2

from ._web_address import IPAddress, host_name, literal_address, port_of
from .base import ToolFailed

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "acp-agent (web_fetch)"
ACCEPT = (
    "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,"
    "application/json;q=0.9,*/*;q=0.5"
)


class ConnectFailed(ToolFailed):
    """No connection to the address (refused, unreachable): another address of the same
    name may still answer."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A response as web_fetch uses it: a redirect's target, or the body read."""

    status: int
    reason: str
    content_type: str
    location: str | None
    """The `Location` of a redirect; None otherwise (the body was read)."""
    body: bytes
    cut: bool
    """The body went on past the download cap: only its beginning was read."""


def proxy_for(url: httpx2.URL, env: Mapping[str, str]) -> str | None:
    """The proxy URL the child environment gives for `url`, or None to connect directly."""
    names = (
        ("https_proxy", "HTTPS_PROXY") if url.scheme == "https" else ("http_proxy", "HTTP_PROXY")
    )
    proxy = next(
        (env[name] for name in (*names, "all_proxy", "ALL_PROXY") if env.get(name, "").strip()),
        None,
    )
    if proxy is None or _bypassed(url, env.get("no_proxy") or env.get("NO_PROXY") or ""):
        return None
    proxy = proxy.strip()
    if "://" not in proxy:
        proxy = f"http://{proxy}"  # curl's reading of `host:port`
    if httpx2.URL(proxy).scheme not in ("http", "https"):
        raise ToolFailed(
            f"The proxy {proxy} is not an http(s) proxy; web_fetch supports only those."
        )
    return proxy


def _bypassed(url: httpx2.URL, no_proxy: str) -> bool:
    """Whether `no_proxy` (comma-separated: `*`, host names that also cover their
    subdomains, `.domain`, `host:port`, addresses and CIDR ranges) names `url`'s host."""
    host = host_name(url)
    port = port_of(url)
    address = literal_address(host)
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        entry_host, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        entry_host = entry_host.removeprefix("*").removeprefix(".").strip("[]")
        if address is not None and _in_network(address, entry_host):
            return True
        if host == entry_host or host.endswith("." + entry_host):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    host, colon, port = entry.rpartition(":")
    if colon and port.isdigit() and (not host.count(":") or host.endswith("]")):
        return host, int(port)
    return entry, None


def _in_network(address: IPAddress, entry: str) -> bool:
    try:
        return address in ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False


async def get(
    url: httpx2.URL,
    *,
    connect_to: IPAddress | None,
    proxy: str | None,
    max_body_bytes: int,
) -> Answer:
    """GET `url` (to `connect_to` when given, else through `proxy`); a redirect comes back
    with its target unread, any other answer with up to `max_body_bytes` of its body.
    Transport failures raise `ToolFailed`. No timeout of its own: the caller's deadline
    covers the whole call."""
    target = url
    headers = {"User-Agent": USER_AGENT, "Accept": ACCEPT}
    extensions: dict[str, str] = {}
    if connect_to is not None:
        target = url.copy_with(host=str(connect_to))
        headers["Host"] = url.netloc.decode("ascii")
        if url.scheme == "https":
            extensions["sni_hostname"] = host_name(url)
    async with httpx2.AsyncClient(
        trust_env=False, proxy=proxy, timeout=None, follow_redirects=False
    ) as client:
        request = client.build_request("GET", target, headers=headers, extensions=extensions)
        try:
            response = await client.send(request, stream=True)
        except httpx2.ConnectError as exc:
            raise ConnectFailed(_transport_failure(url, exc)) from None
        except httpx2.HTTPError as exc:
            raise ToolFailed(_transport_failure(url, exc)) from None
        try:
            return await _answer(response, url, max_body_bytes)
        finally:
            await response.aclose()


async def _answer(response: httpx2.Response, url: httpx2.URL, max_body_bytes: int) -> Answer:
    content_type = response.headers.get("content-type", "")
    location = response.headers.get("location")
    if response.status_code in REDIRECT_STATUSES and location:
        return Answer(
            response.status_code, response.reason_phrase, content_type, location, b"", False
        )
    chunks: list[bytes] = []
    size = 0
    cut = False
    try:
        async for chunk in response.aiter_bytes():
            room = max_body_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                cut = True
                break
            chunks.append(chunk)
            size += len(chunk)
    except httpx2.HTTPError as exc:
        raise ToolFailed(_transport_failure(url, exc)) from None
    return Answer(
        response.status_code, response.reason_phrase, content_type, None, b"".join(chunks), cut
    )


def _transport_failure(url: httpx2.URL, exc: httpx2.HTTPError) -> str:
    host = host_name(url)
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx2.ProxyError):
        return f"The proxy refused the request for {url}: {detail}"
    if isinstance(exc, httpx2.TimeoutException):
        return f"{host} did not answer in time ({type(exc).__name__})."
    if isinstance(exc, httpx2.ConnectError):
        return f"Could not connect to {host}: {detail}"
    return f"Fetching {url} failed: {detail}"


__all__ = ["REDIRECT_STATUSES", "Answer", "ConnectFailed", "get", "proxy_for"]
