"""Retries of model calls that may succeed when sent again, for every provider.

`create_provider` wraps each provider in a `RetryingProvider`. A call that fails with a
retryable `ProviderError` (rate limit, overload, 5xx, lost connection: see `errors.py`)
*before anything reached the consumer* is sent again after a wait:

- exponential backoff with full jitter: uniform in [0, min(max_delay, initial * 2^(n-1)));
- or the server's `retry-after` when it gave one, raised to `min_retry_after` (so
  `retry-after: 0` cannot become a request storm) and capped by `max_delay`;
- at most `max_attempts` tries, and never a wait that would end past `max_total_seconds`
  since the first try: then the last error is raised, its message saying how many tries.

Before each wait a `RetryNotice` event tells the consumer which provider failed, why, and
how long the wait is. A stream that breaks after some events (a dropped connection, an
in-stream overload error) is retried the same way: its notice says `restarts_reply`, so the
consumer drops the partial reply and takes the next attempt's whole reply instead. Sending
the same request again is the one recovery every vendor supports; a continuation of the
partial reply is not.

Each attempt is logged (`_request_log`: debug when it succeeds, info when it is retried,
warning when the request fails) and traced as a GenAI `chat` span.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, aclosing
from typing import TYPE_CHECKING

import anyio

from .. import telemetry
from ..messages import RetryNotice, StreamEvent
from ._request_log import RequestWatch
from .base import ModelRequest, Provider
from .errors import ProviderError

if TYPE_CHECKING:
    from ..config import RetryConfig

_REASON_CHARS = 200


class RetryingProvider:
    """`inner` with retries; `stream()` keeps the `Provider` contract (events may now include
    `RetryNotice`, and errors of the first attempt surface while iterating, not on entry)."""

    def __init__(
        self,
        inner: Provider,
        config: RetryConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
        system: str | None = None,
    ) -> None:
        """`sleep` (default `anyio.sleep`, looked up at each wait), `clock` and `jitter` are
        replaceable for tests; `system` names the vendor in traces."""
        self.name = inner.name
        self.system = system
        self._inner = inner
        self._config = config
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter

    @property
    def inner(self) -> Provider:
        """The wrapped provider."""
        return self._inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        # Leaving the block closes the generator, wherever the reply was left unread.
        return aclosing(self._events(request))

    async def _events(self, request: ModelRequest) -> AsyncGenerator[StreamEvent]:
        started = self._clock()
        attempt = 0
        while True:
            attempt += 1
            began = False
            watch = self._watch(request, attempt)
            # Not current (a generator's yields cross contexts): a child of the turn's span.
            with telemetry.span(watch.span_name, watch.span_attributes(), kind="client") as span:
                try:
                    async with self._inner.stream(request) as events:
                        async for event in events:
                            began = True
                            watch.see(event)
                            yield event
                except ProviderError as exc:
                    watch.failed(span, exc)
                    if not exc.retryable:
                        watch.log_failure(exc, None)
                        raise
                    failure = exc
                except anyio.get_cancelled_exc_class():
                    watch.cancelled()
                    raise
                else:
                    watch.succeeded(span)
                    return
            # Outside the `except`: the consumer must not run inside our exception context.
            try:
                delay = self._delay_or_give_up(failure, attempt, started)
            except ProviderError as exc:
                watch.log_failure(exc, None)
                raise
            watch.log_failure(failure, delay)
            yield RetryNotice(
                provider=self.name,
                reason=_reason(failure),
                delay=delay,
                attempt=attempt,
                max_attempts=self._config.max_attempts,
                restarts_reply=began,
            )
            # Cancellable: a cancelled turn ends here at once.
            await (self._sleep or anyio.sleep)(delay)

    def _watch(self, request: ModelRequest, attempt: int) -> RequestWatch:
        return RequestWatch(
            self.name,
            request.model,
            attempt,
            self._config.max_attempts,
            system=self.system,
            max_output_tokens=request.max_output_tokens,
        )

    def _delay_or_give_up(self, failure: ProviderError, attempt: int, started: float) -> float:
        config = self._config
        if attempt >= config.max_attempts:
            raise _gave_up(failure, f"gave up after {_attempts(attempt)}")
        delay = retry_delay(config, attempt, failure.retry_after, self._jitter())
        elapsed = self._clock() - started
        if elapsed + delay > config.max_total_seconds:
            raise _gave_up(
                failure,
                f"gave up after {_attempts(attempt)} in {elapsed:.0f}s: waiting {delay:.1f}s "
                f"more would pass the retry budget of {config.max_total_seconds:g}s",
            )
        return delay


def retry_delay(
    config: RetryConfig, failures: int, retry_after: float | None, jitter: float
) -> float:
    """Seconds to wait after the `failures`-th failed try; `jitter` is uniform in [0, 1)."""
    if retry_after is not None:
        return min(config.max_delay, max(retry_after, config.min_retry_after))
    ceiling = min(config.max_delay, config.initial_delay * 2.0 ** min(failures - 1, 62))
    return ceiling * jitter


def _gave_up(failure: ProviderError, note: str) -> ProviderError:
    # The same exception, so its class and fields (retry_after, fix ...) stay as the vendor
    # mapper made them; only the message learns how long we tried.
    failure.detail = f"{failure.detail} ({note})"
    failure.args = (f"{failure.provider}: {failure.detail}",)
    return failure


def _attempts(count: int) -> str:
    return f"{count} attempt" if count == 1 else f"{count} attempts"


def _reason(failure: ProviderError) -> str:
    first_line = failure.detail.strip().splitlines()[0] if failure.detail.strip() else ""
    reason = first_line or type(failure).__name__
    if len(reason) > _REASON_CHARS:
        reason = reason[: _REASON_CHARS - 1] + "…"
    return reason
