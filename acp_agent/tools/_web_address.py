"""Where a web_fetch URL leads: whether it may be fetched at all, and whether its host is this
machine, a private network or a cloud metadata service (`LocalReason`).

A host is judged twice:

- from the URL alone, for the permission policy (`host_reason`): an IP literal in any form
  the resolver accepts (`127.1`, `2130706433`, `[::ffff:127.0.0.1]`), `localhost`, the
  names of home and company networks (`.local`, `.internal` ...) and the metadata names.
  No name is resolved before the user said yes: a host name can carry data out through
  the resolver (`<secret>.attacker.example`) as well as a request can;
- at run time, by every address the name resolves to (`address_reason`); the request then
  connects to an address that was judged, so a name that resolves elsewhere a moment later
  (DNS rebinding) gains nothing.

Anything not globally routable counts as local: loopback, private (RFC 1918, fc00::/7),
link-local (169.254/16, fe80::/10), the unspecified address (0.0.0.0 reaches this machine),
shared and reserved ranges; IPv4-mapped IPv6 addresses are judged as the IPv4 address.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

import anyio

from ..local_addresses import is_local_host
from .base import ToolFailed

if TYPE_CHECKING:
    import httpx2  # imported by the first URL parsed: a session starts without it

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
LocalReason: TypeAlias = str
"""Why a host or address is not public, as a phrase: "a loopback address (this machine)"."""

Resolver: TypeAlias = Callable[[str, int], Awaitable[tuple[IPAddress, ...]]]
AddressJudge: TypeAlias = Callable[[IPAddress], LocalReason | None]

SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack ...
        ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    }
)
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog"})

_NUMERIC_IPV4 = re.compile(r"[0-9a-fx.]+")
"""What the C resolver may read as an IPv4 address (`inet_aton`: `127.1`, `0x7f.1`,
`2130706433`): such a host never reaches DNS."""


def parse_fetch_url(raw: str) -> httpx2.URL:
    """The URL as the request will use it; ValueError, with words for the model, when it is
    not an http or https URL with a host."""
    import httpx2

    try:
        url = httpx2.URL(raw.strip())
    except (httpx2.InvalidURL, TypeError) as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    if not url.scheme:
        raise ValueError("give a full URL, starting with https:// or http://")
    if url.scheme not in SCHEMES:
        raise ValueError(f"only http and https URLs can be fetched, not {url.scheme}:")
    if not url.host:
        raise ValueError("the URL names no host")
    return url


def port_of(url: httpx2.URL) -> int:
    return url.port or DEFAULT_PORTS[url.scheme]


def host_name(url: httpx2.URL) -> str:
    """The host as the request sends it: lower case, an international name in its ASCII
    (punycode) form, so a look-alike letter cannot pass for another host in a question."""
    return url.raw_host.decode("ascii").lower().rstrip(".")


def address_reason(address: IPAddress) -> LocalReason | None:
    """Why `address` is not public; None for a globally routable one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_loopback:
        return "a loopback address (this machine)"
    if address.is_unspecified:
        return "the unspecified address (this machine)"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private:
        return "a private network address"
    if not address.is_global:
        return "a reserved, non-public address"
    return None


def host_reason(host: str, judge: AddressJudge = address_reason) -> LocalReason | None:
    """Why `host` (from a URL) is not public, judged without resolving it; None when only
    resolving could tell."""
    host = host.strip("[]").rstrip(".").lower()
    address = literal_address(host)
    if address is not None:
        return judge(address)
    if host in METADATA_NAMES:
        return "a cloud metadata address"
    if host == "localhost" or host.endswith(".localhost"):
        return "this machine (localhost)"
    if is_local_host(host):
        return "a local network name"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address `host` spells, in any form the resolver takes as numeric; None for a name."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    if not _NUMERIC_IPV4.fullmatch(host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


async def system_resolver(host: str, port: int) -> tuple[IPAddress, ...]:
    """Every address `host` resolves to, in the resolver's order (a worker thread asks)."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ToolFailed(f"{host}: the name could not be resolved ({reason}).") from None
    addresses: dict[IPAddress, None] = {}
    for _family, _kind, _proto, _canonical, sockaddr in infos:
        try:
            addresses[ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])] = None
        except ValueError:
            continue
    if not addresses:
        raise ToolFailed(f"{host}: the name resolves to no address.")
    return tuple(addresses)


def strictest(
    addresses: tuple[IPAddress, ...], judge: AddressJudge
) -> tuple[IPAddress, LocalReason] | None:
    """The first address that is not public, with why; None when all are public."""
    for address in addresses:
        reason = judge(address)
        if reason is not None:
            return address, reason
    return None


__all__ = [
    "DEFAULT_PORTS",
    "SCHEMES",
    "AddressJudge",
    "IPAddress",
    "LocalReason",
    "Resolver",
    "address_reason",
    "host_name",
    "host_reason",
    "literal_address",
    "parse_fetch_url",
    "port_of",
    "strictest",
    "system_resolver",
]
