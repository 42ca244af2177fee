"""The one error table: what a vendor reported (plain data) -> our `ProviderError`s, the
same for every vendor, and the transport failures beside it."""

from __future__ import annotations

import httpx
import pytest

from acp_agent.providers import (
    AuthError,
    ContextWindowError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
)
from acp_agent.providers._error_table import Endpoint, Failure, error_for, transport_error
from acp_agent.providers.errors import NotListening

KEY = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
ENDPOINT = Endpoint(
    provider="work",
    base_url="https://llm.example.com/v1",
    timeout=45,
    credentials="the key from WORK_KEY",
    fix="set WORK_KEY",
    key=KEY,
)
WAIT = {"retry-after": "4"}


@pytest.mark.parametrize(
    ("failure", "error", "message", "retry_after"),
    [
        pytest.param(
            Failure(401, "authentication_error", "invalid x-api-key"),
            AuthError,
            "work: the API refused the key from WORK_KEY (HTTP 401): invalid x-api-key; "
            "set WORK_KEY",
            None,
            id="401",
        ),
        pytest.param(
            Failure(429, "rate_limit_error", "slow down", WAIT),
            RateLimitError,
            "work: rate limited (HTTP 429): slow down",
            4.0,
            id="429",
        ),
        pytest.param(
            Failure(529, "overloaded_error", "Overloaded", WAIT),
            ProviderUnavailable,
            "work: the API is overloaded (HTTP 529): Overloaded",
            4.0,
            id="529-overloaded",
        ),
        pytest.param(
            Failure(503, None, "upstream connect error", WAIT),
            ProviderUnavailable,
            "work: server error (HTTP 503): upstream connect error",
            4.0,
            id="503",
        ),
        pytest.param(
            Failure(408, None, "request timeout", WAIT),
            ProviderUnavailable,
            "work: the server timed out (HTTP 408): request timeout",
            4.0,
            id="408",
        ),
        pytest.param(
            Failure(413, "request_too_large", "Request exceeds the maximum size"),
            ContextWindowError,
            "work: the request is too large (HTTP 413): Request exceeds the maximum size",
            None,
            id="413",
        ),
        pytest.param(
            Failure(400, "invalid_request_error", "Input is too long for requested model."),
            ContextWindowError,
            "work: the conversation is too long for the model: Input is too long for "
            "requested model.",
            None,
            id="400-overflow",
        ),
        pytest.param(
            Failure(400, "invalid_request_error", "temperature: must be at most 2", WAIT),
            ProviderError,
            "work: HTTP 400: temperature: must be at most 2",
            None,
            id="400-other",
        ),
        pytest.param(
            Failure(None, "rate_limit_exceeded", "Rate limit reached"),
            RateLimitError,
            "work: rate limited: Rate limit reached",
            None,
            id="stream-rate-limit",
        ),
        pytest.param(
            Failure(None, "context_length_exceeded", "Your input is too large"),
            ContextWindowError,
            "work: the conversation is too long for the model: Your input is too large",
            None,
            id="stream-overflow",
        ),
        pytest.param(
            Failure(None, "overloaded_error", "Overloaded"),
            ProviderUnavailable,
            "work: the stream failed mid-way (overloaded_error): Overloaded",
            None,
            id="stream-overloaded",
        ),
        pytest.param(
            Failure(None, None, "model runner has unexpectedly stopped"),
            ProviderUnavailable,
            "work: the stream failed mid-way: model runner has unexpectedly stopped",
            None,
            id="stream-no-code",
        ),
        pytest.param(
            Failure(None, None, ""),
            ProviderUnavailable,
            "work: the stream failed mid-way: the server reported an error mid-stream",
            None,
            id="stream-empty",
        ),
        pytest.param(
            Failure(None, "invalid_image", "The image data is not a valid image."),
            ProviderError,
            "work: the stream failed mid-way (invalid_image): The image data is not a valid image.",
            None,
            id="stream-unknown-code",
        ),
    ],
)
def test_each_failure_gets_its_class_words_and_wait_whichever_vendor_reported_it(
    failure: Failure, error: type[ProviderError], message: str, retry_after: float | None
) -> None:
    translated = error_for(failure, ENDPOINT)

    assert type(translated) is error
    assert str(translated) == message
    assert translated.retry_after == retry_after


def test_an_error_event_with_a_code_we_do_not_know_is_not_retried_but_one_without_is() -> None:
    # A named code says what is wrong with the request (sending it again costs the whole
    # prompt again); no code at all says only that the stream broke.
    assert not error_for(Failure(None, "invalid_image", "bad image"), ENDPOINT).retryable
    assert error_for(Failure(None, None, "runner crashed"), ENDPOINT).retryable


def test_a_key_the_server_quotes_back_is_masked_wherever_it_appears() -> None:
    other = "sk-proj-AbCdEfGhIjKlMnOp"
    failure = Failure(401, None, f"Incorrect API key provided: {KEY} (also tried {other})")

    message = str(error_for(failure, ENDPOINT))

    assert KEY not in message
    assert other not in message
    assert "[redacted]" in message
    assert "sk-[redacted]" in message


def test_a_404_names_the_url_and_the_fix_the_endpoint_gives() -> None:
    azure = Endpoint(
        provider="azure",
        base_url="https://contoso.openai.azure.com",
        timeout=60,
        credentials="the key from AZURE_OPENAI_API_KEY",
        fix="set AZURE_OPENAI_API_KEY",
        not_found_hint="check the deployment name",
    )
    url = "https://contoso.openai.azure.com/openai/deployments/gpt-9/chat/completions"

    translated = error_for(Failure(404, "DeploymentNotFound", "not found", url=url), azure)

    assert type(translated) is ProviderError
    assert str(translated) == f"azure: HTTP 404 from {url}: not found (check the deployment name)"


@pytest.mark.parametrize(
    ("exc", "error", "message"),
    [
        pytest.param(
            httpx.ReadTimeout("The read operation timed out"),
            ProviderUnavailable,
            "work: no response within 45s (raise providers.work.timeout if the model is slow)",
            id="timeout",
        ),
        pytest.param(
            httpx.RemoteProtocolError("peer closed connection"),
            ProviderUnavailable,
            "work: connection to https://llm.example.com/v1 failed: peer closed connection",
            id="lost",
        ),
    ],
)
def test_transport_failures_say_what_happened_and_where(
    exc: Exception, error: type[ProviderError], message: str
) -> None:
    translated = transport_error(exc, ENDPOINT)

    assert type(translated) is error
    assert str(translated) == message
    assert translated.retryable


def test_a_refused_connection_to_a_local_server_is_not_listening_and_not_retried() -> None:
    local = Endpoint(
        provider="ollama",
        base_url="http://localhost:11434/v1",
        timeout=60,
        credentials="the placeholder key",
        fix="",
    )

    translated = transport_error(httpx.ConnectError("[Errno 111] Connection refused"), local)

    assert type(translated) is NotListening
    assert not translated.retryable
