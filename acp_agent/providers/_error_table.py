"""The one translation of what a vendor reported into our `ProviderError`s, as a table.

Each vendor module only extracts a `Failure` (HTTP status, the vendor's error type or code,
its message, the response headers, the URL) from its SDK exception, HTTP response or stream
error event, and describes itself in an `Endpoint` (which key a refusal names, how to fix
it, how a 404 is explained); the table decides the class and the words. Nothing here knows
an SDK exception class, so a vendor that sends requests with httpx directly uses it as is.

First matching rule wins:

    401 / 403                            AuthError (names the credentials and the fix)
    429                                  RateLimitError (with the server's retry-after)
    5xx whose type is overloaded_error   ProviderUnavailable "the API is overloaded"
    413                                  ContextWindowError "the request is too large"
    400 saying the context overflowed    ContextWindowError
    408, other 5xx                       ProviderUnavailable (with the server's retry-after)
    404                                  ProviderError naming the URL and the likely fix
    any other status                     ProviderError "HTTP <status>: <message>"
    in a stream: a rate-limit code       RateLimitError
    in a stream: context overflow        ContextWindowError
    in a stream: server / overload code  ProviderUnavailable "the stream failed mid-way"
    in a stream: no code at all          ProviderUnavailable (it broke without saying why)
    in a stream: any other code          ProviderError (the server named what is wrong)

Transport failures (`transport_error`): timeouts, refused or lost connections, a stream
event that is not JSON. `parse_retry_after` reads the servers' wait hints.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx2

from ._http_client import HttpStatusError, error_body
from ._transport import not_found, not_listening, redact
from .errors import (
    AuthError,
    ContextWindowError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
)

# Both vendors' wording, and that of the servers that speak their APIs (vLLM, Bedrock).
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](?:length|window|size|limit)|maximum context|(?:prompt|input) is too long"
    r"|too many tokens|exceed(?:s|ed)? (?:the )?context",
    re.IGNORECASE,
)
_OVERFLOW_CODES = frozenset({"context_length_exceeded"})
# The APIs' own words for "try again" and "slow down", in error bodies and stream events
# (OpenAI's, Anthropic's, and the exception names of Bedrock's event stream).
_UNAVAILABLE_CODES = frozenset(
    {
        "server_error",
        "overloaded_error",
        "service_unavailable",
        "api_error",
        "internalServerException",
        "modelStreamErrorException",
        "modelTimeoutException",
        "serviceUnavailableException",
    }
)
_RATE_LIMIT_CODES = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "tokens", "requests", "throttlingException"}
)
_SERVER_ERRORS = range(500, 600)
_EMPTY_STREAM_ERROR = "the server reported an error mid-stream"


@dataclass(frozen=True, slots=True)
class Failure:
    """What the vendor reported, as plain data."""

    status: int | None
    """The HTTP status; None for an error reported inside a stream that began with 200."""
    code: str | None
    """The vendor's error type or code (`overloaded_error`, `context_length_exceeded` ...)."""
    message: str
    """The vendor's message, unredacted."""
    headers: Mapping[str, str] | None = None
    """The response headers (lower-case lookup), for the retry-after hints."""
    url: str = ""
    """The requested URL, which a 404 names."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The provider a failure came from, as its messages name it."""

    provider: str
    base_url: str
    """Where requests go (or the cloud's name), as a connection failure names it."""
    timeout: float
    credentials: str
    """What a 401 refused, never the key itself: "the key from OPENAI_API_KEY"."""
    fix: str
    """What to do about refused credentials."""
    key: str | None = None
    """The key to mask wherever the server quotes it."""
    api_prefix: str = ""
    """What the client appends to `base_url` itself, to explain a 404 (see `not_found`)."""
    not_found_hint: str | None = None
    """A 404's fix when the URL is not the user's to change (Azure deployments, clouds)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    error: type[ProviderError]
    message: str
    """Formatted with `status`, `code`, `detail` (the redacted message), `credentials`."""
    statuses: Collection[int] = ()
    """The statuses it applies to; empty: any HTTP status."""
    codes: Collection[str | None] | None = None
    """The vendor codes it applies to; None: any."""
    overflow: bool = False
    """Only when the code or the message says the context window overflowed."""
    retry_after: bool = False
    """Carries the server's wait hint."""

    def matches(self, failure: Failure) -> bool:
        if self.statuses and failure.status not in self.statuses:
            return False
        if self.codes is not None and failure.code not in self.codes:
            return False
        return not self.overflow or _is_overflow(failure)


_HTTP_RULES: tuple[_Rule, ...] = (
    _Rule(
        AuthError, "the API refused {credentials} (HTTP {status}): {detail}", statuses=(401, 403)
    ),
    _Rule(RateLimitError, "rate limited (HTTP 429): {detail}", statuses=(429,), retry_after=True),
    _Rule(
        ProviderUnavailable,
        "the API is overloaded (HTTP {status}): {detail}",
        statuses=_SERVER_ERRORS,
        codes=("overloaded_error",),
        retry_after=True,
    ),
    _Rule(ContextWindowError, "the request is too large (HTTP 413): {detail}", statuses=(413,)),
    _Rule(
        ContextWindowError,
        "the conversation is too long for the model: {detail}",
        statuses=(400,),
        overflow=True,
    ),
    _Rule(
        ProviderUnavailable,
        "the server timed out (HTTP 408): {detail}",
        statuses=(408,),
        retry_after=True,
    ),
    _Rule(
        ProviderUnavailable,
        "server error (HTTP {status}): {detail}",
        statuses=_SERVER_ERRORS,
        retry_after=True,
    ),
    # 404 is explained by `_not_found`, before the table.
    _Rule(ProviderError, "HTTP {status}: {detail}"),
)
_STREAM_RULES: tuple[_Rule, ...] = (
    _Rule(RateLimitError, "rate limited: {detail}", codes=_RATE_LIMIT_CODES),
    _Rule(
        ContextWindowError, "the conversation is too long for the model: {detail}", overflow=True
    ),
    _Rule(
        ProviderUnavailable,
        "the stream failed mid-way ({code}): {detail}",
        codes=_UNAVAILABLE_CODES,
    ),
    _Rule(ProviderUnavailable, "the stream failed mid-way: {detail}", codes=(None,)),
    _Rule(ProviderError, "the stream failed mid-way ({code}): {detail}"),
)


def error_for(failure: Failure, endpoint: Endpoint) -> ProviderError:
    """The `ProviderError` for what the vendor reported."""
    error = _error_for(failure, endpoint)
    error.status = failure.status
    return error


def _error_for(failure: Failure, endpoint: Endpoint) -> ProviderError:
    detail = redact(failure.message, endpoint.key).strip()
    if failure.status is None:
        rules = _STREAM_RULES
        detail = detail or _EMPTY_STREAM_ERROR
    elif failure.status == 404:
        return ProviderError(endpoint.provider, _not_found(failure, endpoint, detail))
    else:
        rules = _HTTP_RULES
    rule = next(rule for rule in rules if rule.matches(failure))
    message = rule.message.format(
        status=failure.status, code=failure.code, detail=detail, credentials=endpoint.credentials
    )
    if rule.error is AuthError:
        return AuthError(endpoint.provider, message, fix=endpoint.fix)
    retry_after = parse_retry_after(failure.headers) if rule.retry_after else None
    return rule.error(endpoint.provider, message, retry_after=retry_after)


ReadErrorBody = Callable[[object, str], tuple[str | None, str]]
"""A vendor's reading of an error body (its JSON value, else its text; and the SDK's
message for a body that names none): the error's code or type, and its message."""


def http_error(
    exc: Exception, endpoint: Endpoint, read_body: ReadErrorBody
) -> ProviderError | None:
    """What the HTTP exchange raised (an error status, whose body `read_body` reads; a
    transport failure; a stream event that is not JSON) as our error; None for anything
    else, which the vendor translates itself."""
    match exc:
        case HttpStatusError():
            body, fallback = error_body(exc)
            code, message = read_body(body, fallback)
            return error_for(Failure(exc.status, code, message, exc.headers, exc.url), endpoint)
        case httpx2.HTTPError() | json.JSONDecodeError():
            return transport_error(exc, endpoint)
    return None


def transport_error(exc: BaseException, endpoint: Endpoint) -> ProviderError:
    """The `ProviderError` for a failure of the exchange itself (`exc` is what httpx or the
    JSON decoder raised, or what wraps it)."""
    name = endpoint.provider
    match exc:
        case httpx2.TimeoutException():
            return timed_out(endpoint)
        case json.JSONDecodeError():
            return not_json(exc.doc, endpoint)
    if refused := not_listening(name, endpoint.base_url, exc):
        return refused
    reason = redact(str(exc), endpoint.key) or type(exc).__name__
    return ProviderUnavailable(name, f"connection to {endpoint.base_url} failed: {reason}")


def timed_out(endpoint: Endpoint) -> ProviderUnavailable:
    return ProviderUnavailable(
        endpoint.provider,
        f"no response within {endpoint.timeout:g}s "
        f"(raise providers.{endpoint.provider}.timeout if the model is slow)",
    )


def not_json(data: str, endpoint: Endpoint) -> ProviderError:
    sample = redact(data[:120], endpoint.key)
    return ProviderError(
        endpoint.provider, f"the server sent a stream event that is not JSON: {sample!r}"
    )


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """The server's wait hint in seconds: `retry-after-ms`, else `retry-after` (seconds or an
    HTTP date); None when absent or unreadable. Pass headers with lower-case lookup (httpx)."""
    if not headers:
        return None
    if (milliseconds := _number(headers.get("retry-after-ms"))) is not None:
        return max(0.0, milliseconds / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    if (seconds := _number(value)) is not None:
        return max(0.0, seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _is_overflow(failure: Failure) -> bool:
    return failure.code in _OVERFLOW_CODES or bool(_CONTEXT_OVERFLOW.search(failure.message))


def _not_found(failure: Failure, endpoint: Endpoint, detail: str) -> str:
    if endpoint.not_found_hint is not None:
        return f"HTTP 404 from {failure.url}: {detail} ({endpoint.not_found_hint})"
    return not_found(failure.url, endpoint.base_url, detail, api_prefix=endpoint.api_prefix)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
