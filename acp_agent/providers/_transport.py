"""What every HTTP provider can get wrong about the exchange itself, said the same way:
nothing listening at a local address, a URL that is not the API (404), and a `200` whose
body is not an event stream (a proxy's or a login page's HTML); and keys masked wherever a
server quotes them back.

Each of these used to surface late and vaguely: five retries of a refused connection over
6-14 s; "HTTP 404: 404 page not found" without the URL; "stream ended before the model
finished" after retrying an HTML page. Here each fails at once with what happened, where,
and what to change.
"""

from __future__ import annotations

import errno
import re
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx2

from ..local_addresses import is_local_url
from .errors import NotListening, ProviderError

EVENT_STREAM = "text/event-stream"
# Bytes of a body read to tell whether it is an event stream, and to quote its first line.
_PEEK_BYTES = 1024
_QUOTE_CHARS = 120
# A server-sent event stream starts with a field line or a comment (after optional blanks).
_SSE_START = re.compile(rb"^\s*(?::|data:|event:|id:|retry:)")
_VERSION_SEGMENT = re.compile(r"^v\d+", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\bsk-[\w*\-]{6,}")


# --- connection refused ------------------------------------------------------------------


def refused(exc: BaseException) -> bool:
    """Whether `exc` (or what it wraps) is a refused TCP connection."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        if isinstance(current, OSError) and current.errno == errno.ECONNREFUSED:
            return True
        if "connection refused" in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return False


def not_listening(provider: str, url: str, exc: BaseException) -> NotListening | None:
    """The error for a refused connection to a local server; None for any other failure
    (a refused public host may be restarting behind its load balancer: that is retried)."""
    if is_local_url(url) and refused(exc):
        return NotListening(provider, f"nothing is listening at {url} — is the server running?")
    return None


# --- 404 ---------------------------------------------------------------------------------


def not_found(requested: str, base_url: str, detail: str, *, api_prefix: str) -> str:
    """The message for a 404 of `requested`: where it went, what the server said, the fix.

    `api_prefix` is what the client appends to `base_url` itself ("" for OpenAI's clients,
    whose base URL includes /v1; "/v1" for Anthropic's, whose base URL must not).
    """
    segments = [part for part in urlsplit(base_url).path.split("/") if part]
    if api_prefix and segments and segments[-1].lower() == api_prefix.strip("/").lower():
        trimmed = base_url.rstrip("/").removesuffix(segments[-1]).rstrip("/")
        hint = (
            f"The client adds {api_prefix} itself, so base_url should not end with it: "
            f'try base_url = "{trimmed}"'
        )
    elif not api_prefix and not any(_VERSION_SEGMENT.match(part) for part in segments):
        hint = (
            "OpenAI-compatible servers serve the API under /v1: "
            f'try base_url = "{base_url.rstrip("/")}/v1"'
        )
    elif "model" in detail.lower():
        hint = "Check the model id"
    else:
        hint = "Check base_url and the model id"
    detail = detail.strip()
    if detail and detail[-1] not in ".!?":
        detail += "."
    return (
        f"HTTP 404 from {requested}: {detail} {hint}."
        if detail
        else f"HTTP 404 from {requested}. {hint}."
    )


# --- a 200 that is not an event stream -----------------------------------------------------


def checked_event_stream(
    provider: str, response: httpx2.Response, chunks: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    """`chunks` (the body of `response`), refusing a body that is not an event stream.

    A `text/event-stream` answer passes untouched (no extra layer on the hot path). Any
    other is peeked at: HTML fails at once, and so does a body whose first line is not an
    event-stream line, with the content type and that first line in the message; a server
    that streams events under another content type (some do) passes.
    """
    if _media_type(response) == EVENT_STREAM:
        return chunks
    return _peeked(provider, response, chunks)


async def _peeked(
    provider: str, response: httpx2.Response, chunks: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    head = b""
    async for chunk in chunks:
        head += chunk
        if len(head) >= _PEEK_BYTES or (head.strip() and b"\n" in head.lstrip()):
            break
    media_type = _media_type(response)
    if media_type == "text/html" or (head.strip() and not _SSE_START.match(head)):
        raise not_an_event_stream(provider, response, head)
    if head:
        yield head
    async for chunk in chunks:
        yield chunk


def not_an_event_stream(provider: str, response: httpx2.Response, head: bytes) -> ProviderError:
    media_type = response.headers.get("content-type") or "no content type"
    lines = head.decode(errors="replace").strip().splitlines()
    first = redact(lines[0].strip() if lines else "")
    if len(first) > _QUOTE_CHARS:
        first = first[: _QUOTE_CHARS - 1] + "…"
    began = f"; it began: {first!r}" if first else ", empty"
    hint = (
        "a proxy or a login page answered instead of the API: check base_url and the network"
        if _media_type(response) == "text/html"
        else "check that base_url is the API's address"
    )
    return ProviderError(
        provider,
        f"{response.request.url} answered HTTP {response.status_code} with {media_type}, "
        f"not an event stream{began}. {hint[0].upper()}{hint[1:]}",
    )


def _media_type(response: httpx2.Response) -> str:
    return (response.headers.get("content-type") or "").split(";", 1)[0].strip().lower()


# --- keys quoted back --------------------------------------------------------------------


def redact(text: str, key: str | None = None) -> str:
    """`text` from a server with `key` and anything shaped like an API key masked."""
    if key:
        text = text.replace(key, "[redacted]")
    return _KEY_LIKE.sub("sk-[redacted]", text)
