"""Whether a URL names this machine or a private network: a local server (Ollama, LM Studio,
vLLM) rather than a vendor's API.

Such a server needs no API key, and one that refuses a connection is not running: waiting
and retrying will not start it. Decided from the URL alone, without resolving names (no
network at configuration time): `localhost` and `*.localhost`, loopback, private,
link-local and unique-local addresses, and the `.local`, `.internal` and `.lan` names of a
home or company network.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")


def is_local_url(url: str | None) -> bool:
    """True when `url`'s host is this machine or on a private network."""
    if not url:
        return False
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname
    except ValueError:
        return False
    return is_local_host(host or "")


def is_local_host(host: str) -> bool:
    host = host.strip("[]").rstrip(".").lower()
    if not host:
        return False
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_loopback or address.is_private or address.is_link_local or address.is_unspecified
    ) and not address.is_global
