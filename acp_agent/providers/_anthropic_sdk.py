"""The one module that imports the `anthropic` SDK: a version bump touches only this file.

The direct API is called without it (`anthropic.AnthropicProvider`, httpx2). Amazon Bedrock
and Google Vertex AI keep the SDK's clients, for what they carry of real value: request
signing (SigV4, Google credentials), the URLs that take fields out of the body, and
Bedrock's binary event stream. The provider imports this module (about a second) in a
worker thread, and only when such a provider sends its first request.

Errors of this path, beside the table's:

    a cloud type without its extra    ProviderError saying what to install
    a cloud SDK's credential failure  AuthError naming what to run or set
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from anthropic import omit
from anthropic._streaming import SSEDecoder

from ._anthropic_mapping import RequestParams, error_message
from ._error_table import Failure
from .errors import ProviderError

AnyCloudClient = anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex

# The extra each cloud type needs: (pip extra, a module it installs, what it is for).
_EXTRAS = {
    "anthropic-bedrock": ("bedrock", "boto3", "Amazon Bedrock"),
    "anthropic-vertex": ("vertex", "google.auth", "Google Vertex AI"),
}
# Credential failures of the cloud SDKs, which the Anthropic SDK lets through unwrapped.
_CLOUD_AUTH_ERRORS = {
    "anthropic-bedrock": ("botocore.exceptions", "BotoCoreError"),
    "anthropic-vertex": ("google.auth.exceptions", "GoogleAuthError"),
}


@dataclass(frozen=True, slots=True)
class CloudSettings:
    provider: str
    type: str
    region: str | None
    project_id: str | None
    key: str | None
    """Bedrock's API key (bearer token) or Vertex's access token, if configured."""
    base_url: str | None
    timeout: float


class CloudClient:
    """A Bedrock or Vertex client of the SDK, and the exceptions it raises."""

    def __init__(self, settings: CloudSettings, redact: Callable[[str], str]) -> None:
        self._sdk, cloud_errors = _client(settings, redact)
        # RuntimeError: the SDK's "Could not resolve AWS credentials from session".
        self.errors: tuple[type[Exception], ...] = (
            anthropic.AnthropicError,
            cloud_errors,
            RuntimeError,
        )

    async def aclose(self) -> None:
        await self._sdk.close()

    async def send(self, model: str, params: RequestParams) -> httpx2.Response:
        """`messages.create(..., stream=True)`: Bedrock and Vertex move fields of the body
        into the URL, so the SDK's arguments; the response comes back unread."""
        response = await self._sdk.messages.with_streaming_response.create(
            model=model,
            max_tokens=params.max_tokens,
            messages=params.messages,
            system=params.system or omit,
            tools=params.tools or omit,
            thinking=params.thinking or omit,
            stream=True,
        ).__aenter__()
        return response.http_response

    def server_events(
        self,
        http: httpx2.Response,
        plain: Callable[[], AsyncIterator[tuple[str | None, bytes | None]]],
    ) -> AsyncIterator[tuple[str | None, bytes | None]]:
        """(event name, data) of each event: `plain()` for server-sent events, the client's
        own decoder for Bedrock's binary event stream."""
        decoder = self._sdk._make_sse_decoder()
        if type(decoder) is SSEDecoder:
            return plain()
        return _decoded(decoder.aiter_bytes(http.aiter_bytes()))


def failure(exc: Exception) -> Failure | None:
    """What an SDK status error reported, for the error table; None for any other error."""
    if not isinstance(exc, anthropic.APIStatusError):
        return None
    return Failure(
        exc.status_code if exc.status_code >= 400 else None,
        exc.type,
        _vendor_message(exc),
        exc.response.headers,
        str(exc.request.url),
    )


def is_timeout(exc: Exception) -> bool:
    return isinstance(exc, anthropic.APITimeoutError)


def is_connection_error(exc: Exception) -> bool:
    return isinstance(exc, anthropic.APIConnectionError)


def is_credentials_error(exc: Exception) -> bool:
    return isinstance(exc, anthropic.CredentialsError)


def is_sdk_error(exc: Exception) -> bool:
    return isinstance(exc, anthropic.AnthropicError)


def sdk_message(exc: Exception) -> str:
    if isinstance(exc, anthropic.APIError):
        return _vendor_message(exc)
    return str(exc).strip()


def _client(
    settings: CloudSettings, redact: Callable[[str], str]
) -> tuple[AnyCloudClient, type[Exception]]:
    extra, module, platform = _EXTRAS[settings.type]
    missing = f"{platform} needs the optional {extra} extra: pip install 'acp-llm-agent[{extra}]'"
    try:
        importlib.import_module(module)  # the SDK would import it only on the first request
        errors_module, errors_class = _CLOUD_AUTH_ERRORS[settings.type]
        cloud_errors: type[Exception] = getattr(
            importlib.import_module(errors_module), errors_class
        )
    except ImportError as exc:
        raise ProviderError(settings.provider, missing) from exc
    try:
        client: AnyCloudClient
        if settings.type == "anthropic-bedrock":
            client = anthropic.AsyncAnthropicBedrock(
                aws_region=settings.region,
                api_key=settings.key,
                base_url=settings.base_url,
                timeout=settings.timeout,
                max_retries=0,
            )
        else:
            client = anthropic.AsyncAnthropicVertex(
                region=settings.region or anthropic.NOT_GIVEN,
                project_id=settings.project_id or anthropic.NOT_GIVEN,
                access_token=settings.key,
                base_url=settings.base_url,
                timeout=settings.timeout,
                max_retries=0,
            )
    except ImportError as exc:
        raise ProviderError(settings.provider, missing) from exc
    except ValueError as exc:  # no region configured or found in the environment
        variable = "AWS_REGION" if settings.type == "anthropic-bedrock" else "CLOUD_ML_REGION"
        fix = f"Set providers.{settings.provider}.region (or {variable})."
        raise ProviderError(settings.provider, f"{redact(str(exc))} {fix}") from exc
    return client, cloud_errors


def _vendor_message(exc: anthropic.APIError) -> str:
    return error_message(exc.body, exc.message)


async def _decoded(events: AsyncIterator[Any]) -> AsyncIterator[tuple[str | None, bytes | None]]:
    async for sse in events:
        yield sse.event, sse.data.encode() if sse.data else None
