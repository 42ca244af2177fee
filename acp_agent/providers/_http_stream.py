"""The skeleton of every HTTP provider's `stream()`: send the request (its failures
translated), hand out the neutral events, and on any exit (the reply done, an error, a
cancelled turn, a consumer that stopped early) close the events and release the response.

Each vendor fills in how the request is sent (httpx2 directly, or a cloud SDK's client,
which hands back its httpx2 response), which exceptions its client raises and their
translation, and the loop that maps raw events. That loop stays in the vendor module: it is
each provider's hot path, and one more generator layer would cost on every chunk.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import httpx2

from ..messages import StreamEvent
from .base import UnsupportedPart
from .errors import ProviderError, ProviderUnavailable

# Closing a response only releases a socket; bounded so a stuck peer cannot stall a cancel.
CLOSE_TIMEOUT = 2.0


@asynccontextmanager
async def open_stream(
    provider: str,
    send: Callable[[], Awaitable[httpx2.Response]],
    events: Callable[[httpx2.Response], AsyncGenerator[StreamEvent]],
    *,
    errors: tuple[type[Exception], ...],
    translate: Callable[[Exception], ProviderError],
) -> AsyncIterator[AsyncIterator[StreamEvent]]:
    """Entering sends the request (`send`, which hands back the unread response); the
    events are `events(response)`.

    `errors` are the exceptions of the vendor's client that `translate` knows; a part the
    API cannot carry (`UnsupportedPart`, raised while building the body) is a
    `ProviderError` too.
    """
    try:
        response = await send()
    except UnsupportedPart as exc:
        raise ProviderError(provider, f"cannot send this conversation: {exc}") from exc
    except errors as exc:
        raise translate(exc) from exc
    stream = events(response)
    try:
        yield stream
    finally:
        await stream.aclose()
        # Shielded: a cancelled turn must still release the HTTP connection right away.
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await response.aclose()


def ended_early(provider: str) -> ProviderUnavailable:
    """A stream that ended before the vendor's last event: the connection was lost."""
    return ProviderUnavailable(provider, "stream ended before the model finished")
