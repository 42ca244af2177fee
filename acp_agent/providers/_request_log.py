"""What one model request did, for the log and the trace: provider, model, attempt,
status, latency (to the first event and in all), stop reason and tokens.

One line per request: `debug` for a request that succeeded or was cancelled, `info` for a
failure that is retried, `warning` for one that ends the request (not retryable, or the
retries gave up). The message is the one the user sees, already redacted by the mapper.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from .. import telemetry
from ..messages import Stop, StreamEvent, Usage
from .errors import ProviderError

log = logging.getLogger("acp_agent.providers")


@dataclass(slots=True)
class RequestWatch:
    """One attempt of a model request, watched from send to its last event."""

    provider: str
    model: str
    attempt: int
    max_attempts: int
    system: str | None = None
    """The vendor, as the conventions' `gen_ai.provider.name`."""
    max_output_tokens: int | None = None
    sent: float = field(default_factory=time.perf_counter)
    first_event: float | None = None
    usage: Usage | None = None
    stop: str | None = None

    @property
    def span_name(self) -> str:
        return f"chat {self.model}"

    def span_attributes(self) -> dict[str, telemetry.Attribute | None]:
        return {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.system,
            "gen_ai.request.model": self.model,
            "gen_ai.request.max_tokens": self.max_output_tokens,
            "acp_agent.provider": self.provider,
            "acp_agent.attempt": self.attempt,
        }

    def see(self, event: StreamEvent) -> None:
        if self.first_event is None:
            self.first_event = time.perf_counter()
        match event:
            case Usage():
                self.usage = event
            case Stop(reason=reason):
                self.stop = reason
            case _:
                pass

    def succeeded(self, span: telemetry.Span) -> None:
        usage = self.usage
        span.set(
            {
                "gen_ai.response.finish_reasons": (self.stop,) if self.stop else None,
                "gen_ai.usage.input_tokens": _input_tokens(usage) if usage else None,
                "gen_ai.usage.output_tokens": usage.output_tokens if usage else None,
            }
        )
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s: ok in %s%s, stop %s, %s",
                self._head(),
                self._elapsed(),
                self._first(),
                self.stop or "not given",
                _tokens(usage),
            )

    def failed(self, span: telemetry.Span, error: ProviderError) -> None:
        span.fail(_error_type(error))

    def log_failure(self, error: ProviderError, retry_in: float | None) -> None:
        status = f"HTTP {error.status}" if error.status else type(error).__name__
        if retry_in is None:
            log.warning("%s: %s after %s: %s", self._head(), status, self._elapsed(), error)
        else:
            log.info(
                "%s: %s after %s: %s; retrying in %.2fs",
                self._head(),
                status,
                self._elapsed(),
                error,
                retry_in,
            )

    def cancelled(self) -> None:
        log.debug("%s: cancelled after %s", self._head(), self._elapsed())

    def _head(self) -> str:
        return (
            f"model request to {self.provider} ({self.model}), "
            f"attempt {self.attempt} of {self.max_attempts}"
        )

    def _elapsed(self) -> str:
        return f"{time.perf_counter() - self.sent:.2f}s"

    def _first(self) -> str:
        if self.first_event is None:
            return ""
        return f" (first event after {self.first_event - self.sent:.2f}s)"


def _input_tokens(usage: Usage) -> int:
    # The conventions count all input, cached or not; our fields are disjoint.
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


def _tokens(usage: Usage | None) -> str:
    if usage is None:
        return "no token counts"
    cached = (
        f" (cache read {usage.cache_read_tokens}, written {usage.cache_write_tokens})"
        if usage.cache_read_tokens or usage.cache_write_tokens
        else ""
    )
    return f"tokens {usage.input_tokens} in{cached}, {usage.output_tokens} out"


def _error_type(error: ProviderError) -> str:
    return str(error.status) if error.status else type(error).__name__
