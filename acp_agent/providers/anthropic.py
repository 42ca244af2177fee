"""Anthropic's Messages API: directly, or through Amazon Bedrock or Google Vertex AI.

The request and stream mappers live in `_anthropic_mapping`; this module owns the SDK
client (and the optional extras Bedrock and Vertex need), the API key, and what the SDK's
errors report, handed as plain data to the one error table (`_error_table`); the stream's
open and close are the shared skeleton's (`_http_stream`).

Each message's blocks are made once (`_message_cache`); the direct API gets the request as
JSON built from their cached encoding, Bedrock and Vertex (whose clients rewrite the body)
the SDK's arguments. The stream is read raw: server-sent events parsed from the bytes (or
by the client's own decoder, Bedrock's binary event stream), the hot deltas straight from
their JSON, every other event built by the SDK's `construct_type`, exactly as its typed
stream would (`_events` mirrors `anthropic.AsyncStream`, errors included).

Errors that are this module's own, beside the table's:

    a cloud type without its extra    ProviderError saying what to install
    no AWS credentials (Bedrock)      AuthError naming the variables and the profile
    a cloud SDK's credential failure  AuthError naming what to run or set
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, cast

import anthropic
import httpx2
from anthropic import AsyncStream, omit
from anthropic._base_client import make_request_options
from anthropic._constants import RAW_RESPONSE_HEADER
from anthropic._models import construct_type
from anthropic._response import AsyncAPIResponse
from anthropic._streaming import SSEBytesDecoder, SSEDecoder
from anthropic.resources.messages import AsyncMessages
from anthropic.types import Message, RawMessageStreamEvent

from ..messages import StreamEvent
from ._anthropic_mapping import (
    MessageBlocks,
    message_blocks,
    to_body,
    to_params,
)
from ._anthropic_stream import EventMapper
from ._error_table import Endpoint, Failure, error_for, timed_out, transport_error
from ._http_stream import ended_early, open_stream
from ._message_cache import ConvertedMessages
from ._transport import checked_event_stream, redact
from ._wire import loads, server_sent_events
from .base import ModelRequest, model_inputs
from .errors import AuthError, ProviderError, login_fix

if TYPE_CHECKING:
    from ..config import AnthropicProviderConfig

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
# The extra each cloud type needs: (pip extra, a module it installs, what it is for).
AnyAnthropicClient = (
    anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex
)

_EXTRAS = {
    "anthropic-bedrock": ("bedrock", "boto3", "Amazon Bedrock"),
    "anthropic-vertex": ("vertex", "google.auth", "Google Vertex AI"),
}
# Credential failures of the cloud SDKs, which the Anthropic SDK lets through unwrapped.
_CLOUD_AUTH_ERRORS = {
    "anthropic-bedrock": ("botocore.exceptions", "BotoCoreError"),
    "anthropic-vertex": ("google.auth.exceptions", "GoogleAuthError"),
}

# Everything `_translate` knows; the SDK lets a malformed SSE data line escape as JSON errors.
_VENDOR_ERRORS: tuple[type[Exception], ...] = (
    anthropic.AnthropicError,
    httpx2.HTTPError,
    json.JSONDecodeError,
)


class AnthropicProvider:
    def __init__(self, name: str, config: AnthropicProviderConfig, env: Mapping[str, str]) -> None:
        self.name = name
        self._config = config
        self._env = env
        self._key: str | None = None
        self._key_origin: str | None = None
        """The variable (or config key) the key came from, to name it when it is refused."""
        self._key_is_stored = False
        """The key is the one `acp-agent login` stored (neither config nor env gave one)."""
        self._sdk_client: AnyAnthropicClient | None = None
        self._messages: AsyncMessages | None = None
        self._errors = _VENDOR_ERRORS
        self._blocks: ConvertedMessages[MessageBlocks] = ConvertedMessages(message_blocks)

    async def aclose(self) -> None:
        if self._sdk_client is not None:
            client, self._sdk_client, self._messages = self._sdk_client, None, None
            await client.close()

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        # A missing key or cloud extra fails here, before any work; the cloud client also
        # learns the credential errors of its SDK (`_errors`).
        self._get_messages()
        return open_stream(
            self.name,
            lambda: self._send(request),
            self._events,
            errors=self._errors,
            translate=self._translate,
        )

    async def _send(self, request: ModelRequest) -> AsyncAPIResponse[Any]:
        """POST the request; the response comes back unread, to stream its bytes."""
        inputs = model_inputs(self._config, request.model)
        blocks = self._blocks.values(request.messages, inputs)
        caching = self._config.prompt_caching
        if self._config.type == "anthropic":
            # `messages.create(..., stream=True)` with the body encoded already.
            client = cast(anthropic.AsyncAnthropic, self._sdk_client)
            options = make_request_options(extra_headers={RAW_RESPONSE_HEADER: "stream"})
            response = await client.post(
                "/v1/messages",
                cast_to=Message,
                content=to_body(request, blocks, caching=caching),
                options=options,
                stream=True,
                stream_cls=AsyncStream[RawMessageStreamEvent],
            )
            return cast(AsyncAPIResponse[Any], response)
        # Bedrock and Vertex move fields of the body into the URL: the SDK's arguments.
        params = to_params(request, caching=caching, blocks=blocks)
        return (
            await self._get_messages()
            .with_streaming_response.create(
                model=request.model,
                max_tokens=params.max_tokens,
                messages=params.messages,
                system=params.system or omit,
                tools=params.tools or omit,
                thinking=params.thinking or omit,
                stream=True,
            )
            .__aenter__()
        )

    async def _events(self, response: AsyncAPIResponse[Any]) -> AsyncGenerator[StreamEvent]:
        mapper = EventMapper()
        http = response.http_response
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
                    event = construct_type(type_=RawMessageStreamEvent, value=payload)
                    events = mapper.on_event(cast(RawMessageStreamEvent, event))
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
        """(event name, data) of each event, as the client's own decoder would read them."""
        assert self._sdk_client is not None
        decoder: SSEDecoder | SSEBytesDecoder = self._sdk_client._make_sse_decoder()
        if type(decoder) is SSEDecoder:
            return server_sent_events(checked_event_stream(self.name, http, http.aiter_bytes()))
        return _decoded(decoder.aiter_bytes(http.aiter_bytes()))  # Bedrock's event stream

    def _stream_error(self, http: httpx2.Response, data: bytes | None) -> anthropic.APIError:
        """What `anthropic.AsyncStream` raises for an `error` event."""
        text = (data or b"").decode(errors="replace")
        body: object = text
        try:
            body = json.loads(text)
            message = f"{body}"
        except Exception:
            message = text or f"Error code: {http.status_code}"
        assert self._sdk_client is not None
        return self._sdk_client._make_status_error(message, body=body, response=http)

    # --- client ----------------------------------------------------------------------------

    def _get_messages(self) -> AsyncMessages:
        if self._messages is None:
            client = self._client() if self._config.type == "anthropic" else self._cloud_client()
            self._sdk_client, self._messages = client, client.messages
        return self._messages

    def _client(self) -> anthropic.AsyncAnthropic:
        self._key = self._api_key()
        return anthropic.AsyncAnthropic(
            api_key=self._key,
            # Explicit, so ANTHROPIC_BASE_URL cannot redirect a configured provider.
            base_url=self._config.base_url or DEFAULT_BASE_URL,
            timeout=self._config.timeout,
            max_retries=0,  # retries are the shared wrapper's job
        )

    def _cloud_client(self) -> anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex:
        config = self._config
        extra, module, platform = _EXTRAS[config.type]
        missing = (
            f"{platform} needs the optional {extra} extra: pip install 'acp-llm-agent[{extra}]'"
        )
        try:
            importlib.import_module(module)  # the SDK would import it only on the first request
            errors_module, errors_class = _CLOUD_AUTH_ERRORS[config.type]
            cloud_errors: type[Exception] = getattr(
                importlib.import_module(errors_module), errors_class
            )
        except ImportError as exc:
            raise ProviderError(self.name, missing) from exc
        self._key = self._explicit_key()
        try:
            client: anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex
            if config.type == "anthropic-bedrock":
                client = anthropic.AsyncAnthropicBedrock(
                    aws_region=config.region,
                    api_key=self._key,
                    base_url=config.base_url,
                    timeout=config.timeout,
                    max_retries=0,
                )
            else:
                client = anthropic.AsyncAnthropicVertex(
                    region=config.region or anthropic.NOT_GIVEN,
                    project_id=config.project_id or anthropic.NOT_GIVEN,
                    access_token=self._key,
                    base_url=config.base_url,
                    timeout=config.timeout,
                    max_retries=0,
                )
        except ImportError as exc:
            raise ProviderError(self.name, missing) from exc
        except ValueError as exc:  # no region configured or found in the environment
            raise ProviderError(
                self.name, f"{self._redact(str(exc))} {self._region_fix()}"
            ) from exc
        # RuntimeError: the SDK's "Could not resolve AWS credentials from session".
        self._errors = (*_VENDOR_ERRORS, cloud_errors, RuntimeError)
        return client

    def _api_key(self) -> str:
        key = self._config.resolve_api_key(self._env)
        if key is not None:
            if self._config.api_key:
                self._key_origin = f"providers.{self.name}.api_key"
            else:
                self._key_origin = self._config.api_key_env or DEFAULT_KEY_ENV
            return key
        if (stored := self._config.stored_key()) is not None:
            self._key_is_stored = True
            return stored
        variable = self._config.api_key_env or DEFAULT_KEY_ENV
        raise AuthError(self.name, f"no API key: {variable} is not set", fix=self._key_fix())

    def _explicit_key(self) -> str | None:
        """Bedrock's API key (bearer token) or Vertex's access token, only if configured."""
        if self._config.api_key:
            self._key_origin = f"providers.{self.name}.api_key"
            return self._config.api_key
        if self._config.api_key_env:
            self._key_origin = self._config.api_key_env
            return self._env.get(self._config.api_key_env) or None
        return None

    def _key_fix(self) -> str:
        setting = f"providers.{self.name}.api_key_env"
        match self._config.type:
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
        login = login_fix(self.name)
        if self._key_is_stored:
            return f"log in again: `acp-agent login {self.name}` replaces the stored key"
        if self._config.api_key_env:
            return f"set {self._config.api_key_env} (the variable {setting} names), {login}"
        if self._config.api_key:
            return f"check providers.{self.name}.api_key, or use {setting} instead"
        return f"set {DEFAULT_KEY_ENV}, or name another variable in {setting}, {login}"

    def _region_fix(self) -> str:
        variable = "AWS_REGION" if self._config.type == "anthropic-bedrock" else "CLOUD_ML_REGION"
        return f"Set providers.{self.name}.region (or {variable})."

    # --- errors ----------------------------------------------------------------------------

    def _translate(self, exc: Exception) -> ProviderError:
        """What the SDK, the transport or a cloud SDK raised, as the error table's input."""
        name, endpoint = self.name, self._endpoint()
        match exc:
            case anthropic.APIStatusError():
                # Below 400: an `error` event after 200 OK (see `_stream_error`).
                status = exc.status_code if exc.status_code >= 400 else None
                failure = Failure(
                    status,
                    exc.type,
                    _vendor_message(exc),
                    exc.response.headers,
                    str(exc.request.url),
                )
                return error_for(failure, endpoint)
            case anthropic.APITimeoutError():
                return timed_out(endpoint)
            case anthropic.APIConnectionError():
                return transport_error(exc.__cause__ or exc, endpoint)
            case anthropic.CredentialsError():
                message = f"no usable credentials: {self._redact(str(exc))}"
                return AuthError(name, message, fix=self._key_fix())
            case anthropic.APIError():
                return ProviderError(name, self._redact(_vendor_message(exc)))
            case httpx2.HTTPError() | json.JSONDecodeError():
                return transport_error(exc, endpoint)
            case anthropic.AnthropicError():
                return ProviderError(name, self._redact(str(exc).strip()) or type(exc).__name__)
            case RuntimeError() if "credentials" not in str(exc).lower():
                return ProviderError(name, self._redact(str(exc)) or type(exc).__name__)
            case RuntimeError():
                message = f"no AWS credentials found ({self._redact(str(exc))})"
                return AuthError(name, message, fix=self._key_fix())
        # A cloud SDK's credential failure (botocore / google-auth).
        reason = self._redact(str(exc)) or type(exc).__name__
        return AuthError(name, f"no usable credentials: {reason}", fix=self._key_fix())

    def _endpoint(self) -> Endpoint:
        origin = self._key_origin
        region_hint = (
            "check the model id and that the model is enabled in the region, "
            f"providers.{self.name}.region"
        )
        return Endpoint(
            provider=self.name,
            base_url=self._base_url(),
            timeout=self._config.timeout,
            credentials=f"the key from {origin}" if origin else "the credentials",
            fix=self._key_fix(),
            key=self._key,
            api_prefix="/v1",
            not_found_hint=None if self._config.type == "anthropic" else region_hint,
        )

    def _redact(self, text: str) -> str:
        return redact(text, self._key)

    def _base_url(self) -> str:
        if self._config.base_url:
            return self._config.base_url
        match self._config.type:
            case "anthropic-bedrock":
                return "Amazon Bedrock"
            case "anthropic-vertex":
                return "Google Vertex AI"
        return DEFAULT_BASE_URL


def _vendor_message(exc: anthropic.APIError) -> str:
    # The body is {"type": "error", "error": {"type": ..., "message": ...}} from Anthropic;
    # proxies and gateways may answer with text or HTML instead.
    body = exc.body
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            message = error.get("message")
            if isinstance(message, str) and message:
                return message
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


async def _decoded(events: AsyncIterator[Any]) -> AsyncIterator[tuple[str | None, bytes | None]]:
    async for sse in events:
        yield sse.event, sse.data.encode() if sse.data else None
