"""Retries around every provider: what is retried, how long it waits, when it gives up."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx

from acp_agent.config import (
    EchoProviderConfig,
    ModelConfig,
    OpenAIProviderConfig,
    RetryConfig,
)
from acp_agent.messages import Message, RetryNotice, Stop, StreamEvent, TextDelta, TextPart
from acp_agent.providers import (
    AuthError,
    ContextWindowError,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
    create_provider,
)
from acp_agent.providers._error_table import parse_retry_after
from acp_agent.providers.echo import EchoProvider
from acp_agent.providers.openai_chat import OpenAIChatProvider
from acp_agent.providers.retry import RetryingProvider, retry_delay

pytestmark = pytest.mark.anyio

SSE = Path(__file__).parent / "sse"
OPENAI_URL = "https://api.openai.com/v1/chat/completions"
REQUEST = ModelRequest(model="m", system="", messages=[Message("user", [TextPart("hi")])])
REPLY: list[StreamEvent] = [TextDelta("Hello"), Stop("end_turn")]

Attempt = BaseException | Sequence[StreamEvent | BaseException]
"""One scripted call: an exception raised on entry, or events (an exception among them is
raised when reached)."""


class ScriptedProvider:
    """A provider whose calls follow a script, recording how many were made."""

    name = "scripted"

    def __init__(self, *attempts: Attempt) -> None:
        self.attempts = list(attempts)
        self.calls = 0
        self.closed = 0

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        attempt = self.attempts[min(self.calls, len(self.attempts) - 1)]
        self.calls += 1
        if isinstance(attempt, BaseException):
            raise attempt
        events = self._events(attempt)
        try:
            yield events
        finally:
            await events.aclose()
            self.closed += 1

    async def _events(
        self, script: Sequence[StreamEvent | BaseException]
    ) -> AsyncGenerator[StreamEvent]:
        for item in script:
            await anyio.lowlevel.checkpoint()
            if isinstance(item, BaseException):
                raise item
            yield item


class FakeTime:
    """A clock that only moves when the retry wrapper sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await anyio.lowlevel.checkpoint()


def retrying(
    inner: Any,
    fake: FakeTime | None = None,
    jitter: Callable[[], float] = lambda: 0.5,
    **config: Any,
) -> RetryingProvider:
    fake = fake or FakeTime()
    return RetryingProvider(
        inner, RetryConfig(**config), sleep=fake.sleep, clock=fake.clock, jitter=jitter
    )


async def collect(provider: Any, request: ModelRequest = REQUEST) -> list[StreamEvent]:
    async with provider.stream(request) as events:
        return [event async for event in events]


def notices(events: Sequence[StreamEvent]) -> list[RetryNotice]:
    return [event for event in events if isinstance(event, RetryNotice)]


def rate_limited(retry_after: float | None = None) -> RateLimitError:
    return RateLimitError("scripted", "rate limited (HTTP 429): slow down", retry_after=retry_after)


def server_error() -> ProviderUnavailable:
    return ProviderUnavailable("scripted", "server error (HTTP 500): oops")


# --- what is retried ----------------------------------------------------------------------


async def test_a_rate_limit_then_success_yields_a_notice_then_the_reply() -> None:
    inner = ScriptedProvider(rate_limited(), REPLY)
    fake = FakeTime()

    events = await collect(retrying(inner, fake), REQUEST)

    assert inner.calls == 2
    assert events == [
        RetryNotice(
            provider="scripted",
            reason="rate limited (HTTP 429): slow down",
            delay=0.5,  # full jitter: half of the first ceiling (initial_delay 1s)
            attempt=1,
            max_attempts=5,
        ),
        *REPLY,
    ]
    assert fake.sleeps == [0.5]


async def test_a_stream_that_drops_after_output_began_is_asked_again_and_restarts_the_reply() -> (
    None
):
    dropped = ProviderUnavailable("scripted", "connection lost mid-stream")
    inner = ScriptedProvider([TextDelta("Hel"), dropped], REPLY)
    fake = FakeTime()

    events = await collect(retrying(inner, fake))

    assert events == [
        TextDelta("Hel"),
        RetryNotice(
            provider="scripted",
            reason="connection lost mid-stream",
            delay=0.5,
            attempt=1,
            max_attempts=5,
            restarts_reply=True,
        ),
        *REPLY,
    ]
    assert inner.calls == 2
    assert fake.sleeps == [0.5]


async def test_a_stream_that_keeps_dropping_gives_up_after_max_attempts() -> None:
    dropped = ProviderUnavailable("scripted", "connection lost mid-stream")
    inner = ScriptedProvider([TextDelta("Hel"), dropped])

    with pytest.raises(ProviderUnavailable, match=r"mid-stream \(gave up after 3 attempts"):
        await collect(retrying(inner, max_attempts=3))

    assert inner.calls == 3


async def test_a_failure_after_output_that_would_fail_again_is_raised_at_once() -> None:
    refused = ProviderError("scripted", "the model refused the tool schema")
    inner = ScriptedProvider([TextDelta("Hel"), refused], REPLY)

    with pytest.raises(ProviderError) as caught:
        await collect(retrying(inner))

    assert caught.value is refused
    assert inner.calls == 1


async def test_a_failure_inside_the_stream_before_any_event_is_retried() -> None:
    inner = ScriptedProvider([server_error()], REPLY)

    events = await collect(retrying(inner))

    assert inner.calls == 2
    assert inner.closed == 2
    assert len(notices(events)) == 1


@pytest.mark.parametrize(
    "failure",
    [
        AuthError("scripted", "no API key", fix="set KEY"),
        ContextWindowError("scripted", "too long"),
        ProviderError("scripted", "HTTP 404: no such model"),
    ],
    ids=["auth", "context-window", "other"],
)
async def test_errors_that_would_fail_again_are_not_retried(failure: ProviderError) -> None:
    inner = ScriptedProvider(failure, REPLY)

    with pytest.raises(ProviderError) as caught:
        await collect(retrying(inner))

    assert caught.value is failure
    assert inner.calls == 1


async def test_a_bug_in_the_provider_is_not_retried() -> None:
    inner = ScriptedProvider(KeyError("oops"), REPLY)

    with pytest.raises(KeyError):
        await collect(retrying(inner))

    assert inner.calls == 1


# --- how long it waits --------------------------------------------------------------------


async def test_retry_after_is_honoured() -> None:
    fake = FakeTime()
    inner = ScriptedProvider(rate_limited(retry_after=7.0), REPLY)

    events = await collect(retrying(inner, fake))

    assert fake.sleeps == [7.0]
    assert notices(events)[0].delay == 7.0


async def test_retry_after_zero_waits_the_floor_instead() -> None:
    fake = FakeTime()
    inner = ScriptedProvider(rate_limited(0.0), rate_limited(0.0), rate_limited(0.0), REPLY)

    await collect(retrying(inner, fake, min_retry_after=0.5))

    assert fake.sleeps == [0.5, 0.5, 0.5]


async def test_retry_after_is_capped_by_max_delay() -> None:
    fake = FakeTime()
    inner = ScriptedProvider(rate_limited(retry_after=600.0), REPLY)

    await collect(retrying(inner, fake, max_delay=20.0, max_total_seconds=100.0))

    assert fake.sleeps == [20.0]


async def test_backoff_doubles_with_full_jitter_up_to_max_delay() -> None:
    fake = FakeTime()
    inner = ScriptedProvider(*[server_error()] * 6, REPLY)

    await collect(
        retrying(
            inner,
            fake,
            jitter=lambda: 0.99,
            max_attempts=7,
            initial_delay=1.0,
            max_delay=10.0,
            max_total_seconds=1000.0,
        )
    )

    assert fake.sleeps == pytest.approx([0.99, 1.98, 3.96, 7.92, 9.9, 9.9])


def test_full_jitter_spans_zero_to_the_ceiling() -> None:
    config = RetryConfig(initial_delay=2.0, max_delay=30.0)

    assert retry_delay(config, 3, None, 0.0) == 0.0
    assert retry_delay(config, 3, None, 0.5) == 4.0
    assert retry_delay(config, 40, None, 0.5) == 15.0


# --- when it gives up ---------------------------------------------------------------------


async def test_a_persistent_server_error_gives_up_after_max_attempts_naming_them() -> None:
    fake = FakeTime()
    inner = ScriptedProvider(server_error())

    seen: list[StreamEvent] = []

    with pytest.raises(ProviderUnavailable) as caught:
        async with retrying(inner, fake, max_attempts=3).stream(REQUEST) as events:
            async for event in events:
                seen.append(event)

    assert inner.calls == 3
    assert len(fake.sleeps) == 2
    assert [notice.attempt for notice in notices(seen)] == [1, 2]
    assert str(caught.value) == "scripted: server error (HTTP 500): oops (gave up after 3 attempts)"


async def test_notices_count_the_attempts() -> None:
    inner = ScriptedProvider(server_error(), server_error(), REPLY)

    events = await collect(retrying(inner, max_attempts=4))

    assert [(n.attempt, n.max_attempts) for n in notices(events)] == [(1, 4), (2, 4)]


async def test_one_attempt_means_no_retry() -> None:
    inner = ScriptedProvider(rate_limited(), REPLY)

    with pytest.raises(RateLimitError, match=r"slow down \(gave up after 1 attempt\)$"):
        await collect(retrying(inner, max_attempts=1))

    assert inner.calls == 1


async def test_no_wait_ends_past_the_total_budget() -> None:
    fake = FakeTime()
    inner = ScriptedProvider(rate_limited(retry_after=4.0))

    with pytest.raises(RateLimitError) as caught:
        await collect(retrying(inner, fake, max_attempts=10, max_total_seconds=10.0))

    # Tries at 0s and 4s and 8s; waiting 4s more would end at 12s.
    assert fake.sleeps == [4.0, 4.0]
    assert inner.calls == 3
    assert "gave up after 3 attempts in 8s" in str(caught.value)
    assert "retry budget of 10s" in str(caught.value)


async def test_time_spent_in_attempts_counts_against_the_budget() -> None:
    fake = FakeTime()

    class SlowFailure(ScriptedProvider):
        @asynccontextmanager
        async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
            fake.now += 9.4  # the request took 9.4s before it failed
            async with super().stream(request) as events:
                yield events

    inner = SlowFailure(server_error())

    with pytest.raises(ProviderUnavailable, match="gave up after 1 attempt in 9s"):
        await collect(retrying(inner, fake, jitter=lambda: 0.9, max_total_seconds=10.0))

    assert fake.sleeps == []


# --- cancellation -------------------------------------------------------------------------


async def test_a_cancel_during_a_wait_returns_at_once() -> None:
    inner = ScriptedProvider(rate_limited(retry_after=60.0), REPLY)
    provider = RetryingProvider(inner, RetryConfig(max_delay=60.0))  # real anyio.sleep
    seen: list[StreamEvent] = []
    started = time.monotonic()

    with anyio.fail_after(5), anyio.move_on_after(0.1) as scope:
        async with provider.stream(REQUEST) as events:
            async for event in events:
                seen.append(event)

    assert scope.cancelled_caught
    assert time.monotonic() - started < 2
    assert [type(event) for event in seen] == [RetryNotice]
    assert inner.calls == 1


async def test_leaving_early_closes_the_inner_stream() -> None:
    inner = ScriptedProvider(REPLY)

    async with retrying(inner).stream(REQUEST) as events:
        assert await anext(aiter(events)) == TextDelta("Hello")

    assert inner.closed == 1


# --- through the real providers -----------------------------------------------------------

KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
OPENAI = OpenAIProviderConfig(
    type="openai",
    models=(ModelConfig(id="gpt-4.1"),),
    retry=RetryConfig(min_retry_after=0.0, initial_delay=0.001, max_delay=0.01),
)
GPT = ModelRequest(model="gpt-4.1", system="", messages=REQUEST.messages)


def sse(name: str) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=(SSE / name).read_bytes()
    )


def test_create_provider_wraps_every_provider_in_retries() -> None:
    echo = create_provider("echo", EchoProviderConfig(type="echo"), {})
    openai = create_provider("openai", OPENAI, {})

    assert isinstance(echo, RetryingProvider)
    assert isinstance(echo.inner, EchoProvider)
    assert isinstance(openai, RetryingProvider)
    assert isinstance(openai.inner, OpenAIChatProvider)
    assert openai.name == "openai"


@respx.mock
async def test_openai_429_then_success_sends_the_request_again() -> None:
    limited = httpx.Response(
        429,
        json={"error": {"message": "Rate limit reached for gpt-4.1", "type": "tokens"}},
        headers={"retry-after-ms": "5"},
    )
    route = respx.post(OPENAI_URL).mock(side_effect=[limited, sse("openai_text.sse")])
    provider = create_provider("openai", OPENAI, {"OPENAI_API_KEY": KEY})

    events = await collect(provider, GPT)

    assert route.call_count == 2
    (notice,) = notices(events)
    assert notice.provider == "openai"
    assert notice.reason == "rate limited (HTTP 429): Rate limit reached for gpt-4.1"
    assert notice.delay == 0.005
    assert events[-1] == Stop("end_turn")


@respx.mock
async def test_openai_529_overloaded_is_retried() -> None:
    overloaded = httpx.Response(529, json={"error": {"message": "Overloaded"}})
    route = respx.post(OPENAI_URL).mock(side_effect=[overloaded, sse("openai_text.sse")])
    provider = create_provider("openai", OPENAI, {"OPENAI_API_KEY": KEY})

    events = await collect(provider, GPT)

    assert route.call_count == 2
    assert notices(events)[0].reason == "server error (HTTP 529): Overloaded"


@respx.mock
async def test_a_refused_connection_is_retried() -> None:
    route = respx.post(OPENAI_URL).mock(
        side_effect=[httpx.ConnectError("[Errno 111] Connection refused"), sse("openai_text.sse")]
    )
    provider = create_provider("openai", OPENAI, {"OPENAI_API_KEY": KEY})

    events = await collect(provider, GPT)

    assert route.call_count == 2
    assert "Connection refused" in notices(events)[0].reason


@respx.mock
async def test_an_openai_stream_cut_mid_reply_is_sent_again_and_finishes() -> None:
    route = respx.post(OPENAI_URL).mock(
        side_effect=[sse("openai_dropped.sse"), sse("openai_text.sse")]
    )
    provider = create_provider("openai", OPENAI, {"OPENAI_API_KEY": KEY})

    events = await collect(provider, GPT)

    assert route.call_count == 2
    (notice,) = notices(events)
    assert notice.restarts_reply
    before = events[: events.index(notice)]
    after = events[events.index(notice) + 1 :]
    assert any(isinstance(e, TextDelta) for e in before)  # the drop came mid-reply
    assert after[-1] == Stop("end_turn")
    assert not notices(after)


@respx.mock
async def test_a_persistent_openai_500_gives_up_after_max_attempts() -> None:
    route = respx.post(OPENAI_URL).mock(
        return_value=httpx.Response(500, json={"error": {"message": "The server had an error"}})
    )
    config = OPENAI.model_copy(
        update={"retry": OPENAI.retry.model_copy(update={"max_attempts": 3})}
    )
    provider = create_provider("openai", config, {"OPENAI_API_KEY": KEY})

    with pytest.raises(ProviderUnavailable, match=r"The server had an error \(gave up after 3"):
        await collect(provider, GPT)

    assert route.call_count == 3


# --- retry-after parsing ------------------------------------------------------------------


def test_retry_after_headers_in_seconds_milliseconds_and_dates() -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)

    assert parse_retry_after(httpx.Headers({"Retry-After": "2"})) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "2"}) == 0.25
    assert 25 < (parse_retry_after({"retry-after": soon}) or 0) <= 30
    assert parse_retry_after({"retry-after": past}) == 0.0
    assert parse_retry_after({"retry-after": "-5"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "nan"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None
