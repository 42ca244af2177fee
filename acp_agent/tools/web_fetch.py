"""web_fetch: a web page or file by URL, as text the model can read.

What is fetched, and from where:

- http and https only (the params refuse anything else, so no question is asked for them);
- redirects are followed by hand, at most `MAX_REDIRECTS`, each target checked again: its
  scheme, and whether its host is this machine or a private network (`_web_address`). Such
  a host needs the user's yes for each fetch (the permission policy asks, with no
  "always"), which a redirect never got: a redirect there fails the call, telling the model
  to fetch that URL directly, so that the question is asked. Only the host the user was
  asked about may redirect to itself;
- names are resolved only once the call is allowed (a name can carry data out through the
  resolver), then every address is judged and the request connects to a judged one. A
  name that turns out to lead to this machine or a private network fails the call and is
  remembered for the session (`SessionToolState.local_hosts`): calling again asks, as for
  `localhost`. In `bypass` that costs one failed call, since a tool does not know the mode;
- proxies come from the child environment (`_web_http`); through a proxy the proxy
  resolves names, so only what the URL itself says is judged.

What comes back (`_web_content`): HTML as Markdown, JSON pretty-printed, text as it is; a
note for PDFs and images, which a tool result cannot carry. At most `DOWNLOAD_CAP_BYTES` are
read; the text is cut at `max_bytes` with a note giving the `offset` to read on. The whole
call, conversion included, has `timeout_seconds`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from pydantic import Field, field_validator

from ..child_env import child_environment
from ..messages import TextPart, ToolContent
from ._text import fenced
from ._web_address import (
    AddressJudge,
    IPAddress,
    Resolver,
    address_reason,
    host_name,
    host_reason,
    literal_address,
    parse_fetch_url,
    port_of,
    strictest,
    system_resolver,
)
from .base import Destination, Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams

if TYPE_CHECKING:
    # The HTTP client and the HTML converter load with the first fetch (~40 ms of imports a
    # new session does not wait for).
    import httpx2

    from ._web_content import Rendered
    from ._web_http import Answer

MAX_REDIRECTS = 5
DOWNLOAD_CAP_BYTES = 10 * 1024 * 1024
"""Bytes of a response read at most; the rest is not downloaded."""
DEFAULT_MAX_BYTES = 100_000
MIN_MAX_BYTES = 1_000
MAX_MAX_BYTES = 400_000
DEFAULT_TIMEOUT_SECONDS = 30.0
MAX_TIMEOUT_SECONDS = 120.0
MAX_URL_CHARS = 8_192
DISPLAY_CHARS = 20_000
"""What the user sees of the text in the tool call (the model reads up to `max_bytes`)."""


class WebFetchParams(ToolParams):
    url: str = Field(
        max_length=MAX_URL_CHARS,
        description="The http:// or https:// URL to fetch.",
    )
    max_bytes: int = Field(
        DEFAULT_MAX_BYTES,
        ge=MIN_MAX_BYTES,
        le=MAX_MAX_BYTES,
        description="Most bytes of text to return (after HTML is converted to Markdown); a "
        "longer text is cut, with a note giving the offset to read on.",
    )
    offset: int = Field(
        0,
        ge=0,
        description="Byte offset in the converted text to start from: the one a cut note "
        "gave, to read a long page further.",
    )
    timeout_seconds: float = Field(
        DEFAULT_TIMEOUT_SECONDS,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description="Give up after this many seconds.",
    )

    @field_validator("url")
    @classmethod
    def _an_http_url(cls, value: str) -> str:
        return str(parse_fetch_url(value))


@dataclass(frozen=True, slots=True)
class _Fetched:
    url: httpx2.URL
    """Where the answer finally came from."""
    answer: Answer
    redirects: int


@dataclass(frozen=True)
class WebFetch(Tool[WebFetchParams]):
    """Fetch a URL (http or https) and return it as text: an HTML page as Markdown (title,
    main text, code blocks, tables, links; scripts, styles and navigation dropped), JSON
    pretty-printed, other text as it is. Long results are cut at max_bytes, with a note
    giving the offset to read on. It sees what a plain HTTP client sees: no login, no
    JavaScript."""

    name = "web_fetch"
    kind = "fetch"
    params_model = WebFetchParams

    resolver: Resolver = system_resolver
    """How names become addresses (tests give a fixed table)."""
    judge: AddressJudge = address_reason
    """Why an address is not public (tests let 127.0.0.1 pass for a public host)."""

    def title(self, params: WebFetchParams, ctx: ToolContext) -> str:
        # The permission request and every client show the title: it is the exact URL.
        return f"Fetch {params.url}"

    def destination(self, params: WebFetchParams, ctx: ToolContext) -> Destination:
        url = parse_fetch_url(params.url)
        return Destination(host_name(url), self._local_reason(url, ctx))

    async def preview(self, params: WebFetchParams, ctx: ToolContext) -> tuple[ToolContent, ...]:
        destination = self.destination(params, ctx)
        if destination.local is None:
            return ()
        return (
            TextPart(
                f"{destination.host} is {destination.local}: each fetch from it is asked about."
            ),
        )

    async def run(self, params: WebFetchParams, ctx: ToolContext) -> ToolOutcome:
        from ._web_content import render

        origin = parse_fetch_url(params.url)
        env = ctx.child_env if ctx.child_env is not None else child_environment(os.environ)
        timeout = params.timeout_seconds
        with anyio.move_on_after(timeout) as deadline:
            fetched = await self._follow(origin, ctx, env)
            answer = fetched.answer
            rendered = await anyio.to_thread.run_sync(
                render, answer.body, answer.content_type, str(fetched.url), abandon_on_cancel=True
            )
        if deadline.cancelled_caught:
            raise ToolFailed(
                f"Timed out after {timeout:g} s fetching {origin}. For a slow server, call "
                f"again with a larger timeout_seconds (at most {MAX_TIMEOUT_SECONDS:g})."
            )
        return _outcome(origin, fetched, rendered, params)

    # --- following redirects -------------------------------------------------------------

    async def _follow(
        self, origin: httpx2.URL, ctx: ToolContext, env: Mapping[str, str]
    ) -> _Fetched:
        asked_local = self._local_reason(origin, ctx) is not None
        url = origin
        for redirects in range(MAX_REDIRECTS + 1):
            answer = await self._get(url, origin, asked_local, ctx, env)
            if answer.location is None:
                return _Fetched(url, answer, redirects)
            target = _redirect_target(url, answer.location)
            if redirects == MAX_REDIRECTS:
                raise ToolFailed(
                    f"{origin} redirected more than {MAX_REDIRECTS} times (the last time to "
                    f"{target}); stopped there."
                )
            url = target
        raise AssertionError("unreachable: the last round returns or raises")

    async def _get(
        self,
        url: httpx2.URL,
        origin: httpx2.URL,
        asked_local: bool,
        ctx: ToolContext,
        env: Mapping[str, str],
    ) -> Answer:
        """One request of the chain, after its host was judged."""
        from ._web_http import get, proxy_for

        host = host_name(url)
        # Only the very host the user was asked about (asked every time) may be local.
        may_be_local = asked_local and (host, port_of(url)) == (host_name(origin), port_of(origin))
        reason = self._local_reason(url, ctx)
        if reason is not None and not may_be_local:
            raise ToolFailed(_not_asked(url, origin, host, reason))
        proxy = proxy_for(url, env)
        if proxy is not None:
            return await get(
                url,
                connect_to=None,
                proxy=proxy,
                max_body_bytes=DOWNLOAD_CAP_BYTES,
            )
        literal = literal_address(host)
        addresses = (literal,) if literal is not None else await self.resolver(host, port_of(url))
        found = strictest(addresses, self.judge)
        if found is not None and not may_be_local:
            address, why = found
            learned = f"a name for {address}, {why}"
            ctx.state.local_hosts[host] = learned
            raise ToolFailed(_not_asked(url, origin, host, learned))
        return await _first_answer(url, addresses)

    def _local_reason(self, url: httpx2.URL, ctx: ToolContext) -> str | None:
        """Why the URL's host is not public, as far as is known without resolving it now."""
        host = host_name(url)
        return host_reason(host, self.judge) or ctx.state.local_hosts.get(host)


async def _first_answer(url: httpx2.URL, addresses: tuple[IPAddress, ...]) -> Answer:
    """The answer from the first address that takes the connection, in the resolver's order."""
    from ._web_http import ConnectFailed, get

    failure: ConnectFailed | None = None
    for address in addresses:
        try:
            return await get(
                url,
                connect_to=address,
                proxy=None,
                max_body_bytes=DOWNLOAD_CAP_BYTES,
            )
        except ConnectFailed as exc:
            failure = exc
    assert failure is not None  # a resolver returns at least one address
    raise failure


def _redirect_target(url: httpx2.URL, location: str) -> httpx2.URL:
    import httpx2

    try:
        return parse_fetch_url(str(url.join(location)))
    except (ValueError, httpx2.InvalidURL) as exc:
        raise ToolFailed(
            f"{url} redirected to {location!r}, which is not followed: {exc}."
        ) from None


def _not_asked(url: httpx2.URL, origin: httpx2.URL, host: str, reason: str) -> str:
    """Why a request the user was not asked about is not sent, and what the model can do."""
    where = f"{host} is {reason}"
    if url == origin:
        return (
            f"Not fetched: {where}. Fetching from this machine or a private network needs "
            "the user's yes each time, which this call did not get: call web_fetch again "
            "with the same URL to ask."
        )
    return (
        f"Not fetched: {origin} redirected to {url}, and {where}. Fetching from this machine "
        "or a private network needs the user's yes each time: call web_fetch with that URL "
        "directly to ask."
    )


# --- the result ----------------------------------------------------------------------------


def _outcome(
    origin: httpx2.URL, fetched: _Fetched, rendered: Rendered, params: WebFetchParams
) -> ToolOutcome:
    answer = fetched.answer
    encoded = rendered.text.encode("utf-8")
    total = len(encoded)
    start = _char_start(encoded, min(params.offset, total))
    end = _char_start(encoded, min(start + params.max_bytes, total))
    piece = encoded[start:end].decode("utf-8")
    notes = _notes(answer, params, start, end, total)
    head = _heading(origin, fetched, rendered)
    model_text = "\n\n".join(part for part in (head, piece, *notes) if part)
    shown = piece[:DISPLAY_CHARS]
    display: list[ToolContent] = [TextPart(head)]
    if shown:
        display.append(TextPart(fenced(shown, "markdown" if rendered.kind == "html" else "")))
    if len(shown) < len(piece):
        display.append(TextPart(f"[{len(piece) - len(shown):,} more characters went to the model]"))
    display.extend(TextPart(note) for note in notes)
    return ToolOutcome(
        model_text=model_text,
        display=tuple(display),
        title=f"Fetch {origin}",
        raw_output={
            "url": str(origin),
            "final_url": str(fetched.url),
            "status": answer.status,
            "content_type": answer.content_type,
            "bytes": len(answer.body),
            "redirects": fetched.redirects,
            "text_bytes": total,
            "offset": start,
            "returned_bytes": end - start,
            "truncated": end < total,
            "download_cut": answer.cut,
        },
        failed=answer.status >= 400,
    )


def _heading(origin: httpx2.URL, fetched: _Fetched, rendered: Rendered) -> str:
    answer = fetched.answer
    status = f"HTTP {answer.status} {answer.reason}".rstrip()
    what = rendered.media_type or "no content type"
    head = f"{fetched.url} ({status}, {what})"
    if fetched.redirects:
        head += f"\nRedirected from {origin}"
    return head


def _notes(answer: Answer, params: WebFetchParams, start: int, end: int, total: int) -> list[str]:
    notes = []
    if answer.cut:
        notes.append(
            f"[The response is larger than {DOWNLOAD_CAP_BYTES // (1024 * 1024)} MB: only its "
            "beginning was downloaded and converted.]"
        )
    if params.offset > 0 and params.offset >= total:
        notes.append(f"[offset {params.offset} is past the end: the text has {total:,} bytes.]")
    elif end < total:
        notes.append(
            f"[Cut: this is bytes {start:,}-{end:,} of {total:,} of the text. Call web_fetch "
            f"again with offset={end} to read on.]"
        )
    return notes


def _char_start(encoded: bytes, index: int) -> int:
    """`index`, moved back to the start of the UTF-8 character it falls in."""
    while 0 < index < len(encoded) and encoded[index] & 0xC0 == 0x80:
        index -= 1
    return index


__all__ = ["WebFetch", "WebFetchParams"]
