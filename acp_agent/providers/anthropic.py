"""Anthropic's Messages API: directly, or through Amazon Bedrock or Google Vertex AI.

The request and stream mappers live in `_anthropic_mapping` and `_anthropic_stream`; this
module owns the API key and what the server's errors report, handed as plain data to the
one error table (`_error_table`); the HTTP client is the providers' shared skeleton's
(`_provider_client`), as are the stream's open and close (`_http_stream`).

The direct API is called with httpx2 (`_http_client`), as the `anthropic` SDK would call it
(the same URL, `anthropic-version`, authentication and JSON body, built from each message's
cached blocks, `_message_cache`): the SDK is not imported on this path. Bedrock and Vertex
keep the SDK's clients, which sign their requests (`_anthropic_sdk`, imported in a worker
thread on their first request). Either way the stream is read raw: server-sent events
parsed from the bytes (or by the client's own decoder, Bedrock's binary event stream), and
every event mapped from its JSON.

Errors that are this module's own, beside the table's:

    a cloud type without its extra    ProviderError saying what to install
    no AWS credentials (Bedrock)      AuthError naming the variables and the profile
    a cloud SDK's credential failure  AuthError naming what to run or set
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import httpx2

from ..config import AnthropicProviderConfig
from ..messages import StreamEvent
from . import _lazy_import
from ._anthropic_mapping import (
    MessageBlocks,
    error_message,
    error_type,
    message_blocks,
    to_body,
    to_params,
)
from ._anthropic_stream import EventMapper
from ._error_table import Endpoint, Failure, error_for, http_error, timed_out, transport_error
from ._http_client import TRANSPORT_ERRORS, json_headers, post_stream
from ._http_stream import ended_early, open_stream
from ._message_cache import ConvertedMessages
from ._provider_client import ProviderClient
from ._transport import checked_event_stream, redact
from ._wire import loads, server_sent_events
from .base import ModelRequest, model_inputs
from .errors import AuthError, ProviderError, key_fix

if TYPE_CHECKING:
    from ._anthropic_sdk import CloudClient

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
API_VERSION = "2026-10-21"
"""The `anthropic-version` header: the SDK's `ANTHROPIC_API_VERSION` (a test holds them
equal), the API version whose events the mapping reads."""
_SDK = "acp_agent.providers._anthropic_sdk"


class AnthropicProvider(ProviderClient[AnthropicProviderConfig]):
    def __init__(self, name: str, config: AnthropicProviderConfig, env: Mapping[str, str]) -> None:
        super().__init__(name, config, env)
        self._key_is_stored = False
        """The key is the one `acp-agent login` stored (neither config nor env gave one)."""
        self._cloud: CloudClient | None = None
        self._errors: tuple[type[Exception], ...] = TRANSPORT_ERRORS
        self._blocks: ConvertedMessages[MessageBlocks] = ConvertedMessages(message_blocks)

    async def aclose(self) -> None:
        await super().aclose()
        if self._cloud is not None:
            cloud, self._cloud = self._cloud, None
            await cloud.aclose()

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        if self.config.type == "anthropic":
            self.client()  # a missing key fails here, before any work
        return open_stream(
            self.name,
            lambda: self._send(request),
            self._events,
            errors=self._errors,
            translate=self._translate,
        )

    async def _send(self, request: ModelRequest) -> httpx2.Response:
        """POST the request; the response comes back unread, to stream its bytes."""
        inputs = model_inputs(self.config, request.model)
        blocks = self._blocks.values(request.messages, inputs)
        caching = self.config.prompt_caching
        if self.config.type == "anthropic":
            url = f"{self._base_url().rstrip('/')}/v1/messages"
            body = to_body(request, blocks, caching=caching)
            return await post_stream(self.client(), url, headers=self._headers, content=body)
        cloud = await self._cloud_client()
        params = to_params(request, caching=caching, blocks=blocks)
        try:
            return await cloud.send(request.model, params)
        except cloud.errors as exc:  # learnt after `stream()` handed the skeleton its errors
            raise self._translate(exc) from exc

    async def _events(self, http: httpx2.Response) -> AsyncGenerator[StreamEvent]:
        mapper = EventMapper()
        try:
            async for name, data in self._server_events(http):
                if name == "ping" or name is None:
                    continue
                if name == "error":
                    raise self._stream_error(http, data)
                if not data:
                    continue
                payload = loads(data)
                events = mapper.on_payload(payload)
                if events is None:
                    events = mapper.on_event(payload)
                for neutral in events:
                    yield neutral
        except self._errors as exc:
            raise self._translate(exc) from exc
        if not mapper.finished:
            raise ended_early(self.name)
        for neutral in mapper.finish():
            yield neutral

    def _server_events(
        self, http: httpx2.Response
    ) -> AsyncIterator[tuple[str | None, bytes | None]]:
        def plain() -> AsyncIterator[tuple[str | None, bytes | None]]:
            return server_sent_events(checked_event_stream(self.name, http, http.aiter_bytes()))

        return plain() if self._cloud is None else self._cloud.server_events(http, plain)

    def _stream_error(self, http: httpx2.Response, data: bytes | None) -> ProviderError:
        """What `anthropic.AsyncStream` reports for an `error` event."""
        text = (data or b"").decode(errors="replace")
        body: object = text
        try:
            body = json.loads(text)
            fallback = f"{body}"
        except ValueError:
            fallback = text or f"Error code: {http.status_code}"
        return error_for(
            Failure(None, error_type(body), error_message(body, fallback)), self._endpoint()
        )

    # --- clients ---------------------------------------------------------------------------

    def _request_headers(self, key: str | None) -> dict[str, str]:
        headers = {**json_headers(), "anthropic-version": API_VERSION}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _cloud_client(self) -> CloudClient:
        if self._cloud is None:
            await _lazy_import.finish(_SDK)
            from ._anthropic_sdk import CloudClient, CloudSettings

            config = self.config
            self._key = self._explicit_key()
            settings = CloudSettings(
                provider=self.name,
                type=config.type,
                region=config.region,
                project_id=config.project_id,
                key=self._key,
                base_url=config.base_url,
                timeout=config.timeout,
            )
            self._cloud = CloudClient(settings, self._redact)
            self._errors = (*TRANSPORT_ERRORS, *self._cloud.errors)
        return self._cloud

    def _api_key(self) -> str:
        key = self.config.resolve_api_key(self._env)
        if key is not None:
            if self.config.api_key:
                self._key_origin = f"providers.{self.name}.api_key"
            else:
                self._key_origin = self.config.api_key_env or DEFAULT_KEY_ENV
            return key
        if (stored := self.config.stored_key()) is not None:
            self._key_is_stored = True
            return stored
        variable = self.config.api_key_env or DEFAULT_KEY_ENV
        raise AuthError(self.name, f"no API key: {variable} is not set", fix=self._key_fix())

    def _explicit_key(self) -> str | None:
        """Bedrock's API key (bearer token) or Vertex's access token, only if configured."""
        if self.config.api_key:
            self._key_origin = f"providers.{self.name}.api_key"
            return self.config.api_key
        if self.config.api_key_env:
            self._key_origin = self.config.api_key_env
            return self._env.get(self.config.api_key_env) or None
        return None

    def _key_fix(self) -> str:
        setting = f"providers.{self.name}.api_key_env"
        match self.config.type:
            case "anthropic-bedrock":
                return (
                    "set AWS credentials: AWS_PROFILE to a profile in ~/.aws/config (run "
                    "`aws sso login` first for SSO), or AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (with "
                    "AWS_SESSION_TOKEN for temporary credentials), or put a Bedrock API key in "
                    f"AWS_BEARER_TOKEN_BEDROCK or the variable {setting} names; and check that "
                    f"the model is enabled in the region (providers.{self.name}.region)"
                )
            case "anthropic-vertex":
                return (
                    "run `gcloud auth application-default login` or set "
                    "GOOGLE_APPLICATION_CREDENTIALS, and check "
                    f"providers.{self.name}.project_id and providers.{self.name}.region"
                )
        return key_fix(
            self.name,
            stored=self._key_is_stored,
            api_key_env=self.config.api_key_env,
            api_key=bool(self.config.api_key),
            default_env=DEFAULT_KEY_ENV,
        )

    # --- errors ----------------------------------------------------------------------------

    def _translate(self, exc: Exception) -> ProviderError:
        """What the server, the transport or a cloud SDK raised, as the error table's input."""
        name, endpoint = self.name, self._endpoint()
        if (known := http_error(exc, endpoint, _read_error_body)) is not None:
            return known
        if self._cloud is None:
            return ProviderError(name, self._redact(str(exc)) or type(exc).__name__)
        return self._translate_cloud(exc, endpoint)

    def _translate_cloud(self, exc: Exception, endpoint: Endpoint) -> ProviderError:
        from . import _anthropic_sdk as sdk

        name = self.name
        if (failure := sdk.failure(exc)) is not None:
            return error_for(failure, endpoint)
        if sdk.is_timeout(exc):
            return timed_out(endpoint)
        if sdk.is_connection_error(exc):
            return transport_error(exc.__cause__ or exc, endpoint)
        if sdk.is_credentials_error(exc):
            message = f"no usable credentials: {self._redact(str(exc))}"
            return AuthError(name, message, fix=self._key_fix())
        if sdk.is_sdk_error(exc):
            return ProviderError(name, self._redact(sdk.sdk_message(exc)) or type(exc).__name__)
        if isinstance(exc, RuntimeError):
            if "credentials" not in str(exc).lower():
                return ProviderError(name, self._redact(str(exc)) or type(exc).__name__)
            message = f"no AWS credentials found ({self._redact(str(exc))})"
            return AuthError(name, message, fix=self._key_fix())
        # A cloud SDK's credential failure (botocore / google-auth).
        reason = self._redact(str(exc)) or type(exc).__name__
        return AuthError(name, f"no usable credentials: {reason}", fix=self._key_fix())

    def _endpoint(self) -> Endpoint:
        region_hint = (
            "check the model id and that the model is enabled in the region, "
            f"providers.{self.name}.region"
        )
        return self._endpoint_at(
            self._base_url(),
            self._own_credentials,
            api_prefix="/v1",
            not_found_hint=None if self.config.type == "anthropic" else region_hint,
        )

    def _own_credentials(self) -> tuple[str, str, str | None]:
        origin = self._key_origin
        return f"the key from {origin}" if origin else "the credentials", self._key_fix(), self._key

    def _redact(self, text: str) -> str:
        return redact(text, self._key)

    def _base_url(self) -> str:
        if self.config.base_url:
            return self.config.base_url
        match self.config.type:
            case "anthropic-bedrock":
                return "Amazon Bedrock"
            case "anthropic-vertex":
                return "Google Vertex AI"
        return DEFAULT_BASE_URL


def _read_error_body(body: object, fallback: str) -> tuple[str | None, str]:
    return error_type(body), error_message(body, fallback)
