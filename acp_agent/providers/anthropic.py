"""Anthropic's Messages API: directly, or through Amazon Bedrock or Google Vertex AI.

The request and stream mappers live in `_anthropic_mapping`; this module owns the SDK
client (and the optional extras Bedrock and Vertex need), the API key, the connection's
lifetime and the translation of every vendor error.

Each message's blocks are made once (`_message_cache`); the direct API gets the request as
JSON built from their cached encoding, Bedrock and Vertex (whose clients rewrite the body)
the SDK's arguments. The stream is read raw: server-sent events parsed from the bytes (or
by the client's own decoder, Bedrock's binary event stream), the hot deltas straight from
their JSON, every other event built by the SDK's `construct_type`, exactly as its typed
stream would (`_events` mirrors `anthropic.AsyncStream`, errors included).

Error mapping, decided here once:

    401 / 403                         AuthError (names the key variable or cloud credentials)
    429                               RateLimitError (with the server's retry-after)
    529 overloaded                    RateLimitError (the API's "too busy, retry later")
    400 "prompt is too long", 413     ContextWindowError
    404                               ProviderError naming the URL (and a /v1 in base_url)
    5xx, 408, timeouts, lost links    ProviderUnavailable
    refused at a local address        NotListening (not retried: the server is not running)
    200 that is not an event stream   ProviderError quoting its content type and first line
    no AWS credentials (Bedrock)      AuthError naming the variables and the profile
    `error` event mid-stream          ProviderUnavailable (e.g. overloaded_error after 200 OK)
    a stream without message_stop     ProviderUnavailable
    anything else                     ProviderError with the vendor's message
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anthropic
import anyio
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
    UnsupportedPart,
    message_blocks,
    to_body,
    to_params,
)
from ._anthropic_stream import EventMapper
from ._message_cache import ConvertedMessages
from ._transport import checked_event_stream, not_found, not_listening
from ._wire import loads, server_sent_events
from .base import ModelRequest, model_inputs
from .errors import (
    AuthError,
    ContextWindowError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
    login_fix,
)
from .retry import parse_retry_after

if TYPE_CHECKING:
    from ..config import AnthropicProviderConfig

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
# Closing a response only releases a socket; bounded so a stuck peer cannot stall a cancel.
_CLOSE_TIMEOUT = 2.0

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
_CONTEXT_OVERFLOW = re.compile(
    r"prompt is too long|exceed(?:s|ed)? (?:the )?context|context (?:window|length|limit)",
    re.IGNORECASE,
)
_KEY_LIKE = re.compile(r"\bsk-[\w*\-]{6,}")


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

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        self._get_messages()  # a missing key fails here, before any work
        try:
            inputs = model_inputs(self._config, request.model)
            blocks = self._blocks.values(request.messages, inputs)
            response = await self._send(request, blocks)
        except UnsupportedPart as exc:
            raise ProviderError(self.name, f"cannot send this conversation: {exc}") from exc
        except self._errors as exc:
            raise self._translate(exc) from exc
        events = self._events(response)
        try:
            yield events
        finally:
            await events.aclose()
            # Shielded: a cancelled turn must still release the HTTP connection right away.
            with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                await response.close()

    async def _send(
        self, request: ModelRequest, blocks: list[MessageBlocks]
    ) -> AsyncAPIResponse[Any]:
        """POST the request; the response comes back unread, to stream its bytes."""
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
            raise ProviderUnavailable(self.name, "stream ended before the model finished")
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
        """The one place where vendor and transport exceptions become `ProviderError`s."""
        name = self.name
        match exc:
            case anthropic.APIStatusError() if exc.status_code < 400:
                # An `error` event after 200 OK: the stream broke; the call can be retried.
                kind = exc.type or "error"
                return ProviderUnavailable(
                    name, f"the stream failed mid-way ({kind}): {self._detail(exc)}"
                )
            case anthropic.AuthenticationError() | anthropic.PermissionDeniedError():
                detail = self._detail(exc)
                refused = (
                    f"the key from {self._key_origin}" if self._key_origin else "the credentials"
                )
                message = f"the API refused {refused} (HTTP {exc.status_code}): {detail}"
                return AuthError(name, message, fix=self._key_fix())
            case anthropic.RateLimitError():
                return RateLimitError(
                    name,
                    f"rate limited (HTTP 429): {self._detail(exc)}",
                    retry_after=parse_retry_after(exc.response.headers),
                )
            case anthropic.APIStatusError() if exc.status_code == 529:
                return RateLimitError(
                    name,
                    f"the API is overloaded (HTTP 529): {self._detail(exc)}",
                    retry_after=parse_retry_after(exc.response.headers),
                )
            case anthropic.ContentTooLargeError():
                return ContextWindowError(
                    name, f"the request is too large (HTTP 413): {self._detail(exc)}"
                )
            case anthropic.BadRequestError() if _CONTEXT_OVERFLOW.search(_vendor_message(exc)):
                return ContextWindowError(
                    name, f"the conversation is too long for the model: {self._detail(exc)}"
                )
            case anthropic.APIStatusError() if exc.status_code >= 500 or exc.status_code == 408:
                return ProviderUnavailable(
                    name,
                    f"server error (HTTP {exc.status_code}): {self._detail(exc)}",
                    retry_after=parse_retry_after(exc.response.headers),
                )
            case anthropic.NotFoundError():
                return ProviderError(name, self._404(exc))
            case anthropic.APIStatusError():
                return ProviderError(name, f"HTTP {exc.status_code}: {self._detail(exc)}")
            case anthropic.APITimeoutError():
                return ProviderUnavailable(
                    name,
                    f"no response within {self._config.timeout:g}s "
                    f"(raise providers.{name}.timeout if the model is slow)",
                )
            case anthropic.APIConnectionError():
                if refused_locally := not_listening(name, self._base_url(), exc):
                    return refused_locally
                return ProviderUnavailable(name, self._connection_failed(exc.__cause__ or exc))
            case anthropic.CredentialsError():
                message = f"no usable credentials: {self._redact(str(exc))}"
                return AuthError(name, message, fix=self._key_fix())
            case anthropic.APIError():
                return ProviderError(name, self._detail(exc))
            case httpx2.HTTPError():
                if refused_locally := not_listening(name, self._base_url(), exc):
                    return refused_locally
                return ProviderUnavailable(name, self._connection_failed(exc))
            case json.JSONDecodeError():
                sample = self._redact(exc.doc[:120])
                return ProviderError(
                    name, f"the server sent a stream event that is not JSON: {sample!r}"
                )
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

    def _connection_failed(self, cause: BaseException) -> str:
        reason = self._redact(str(cause)) or type(cause).__name__
        return f"connection to {self._base_url()} failed: {reason}"

    def _404(self, exc: anthropic.NotFoundError) -> str:
        requested, detail = str(exc.request.url), self._detail(exc)
        if self._config.type == "anthropic":
            return not_found(requested, self._base_url(), detail, api_prefix="/v1")
        return (
            f"HTTP 404 from {requested}: {detail} (check the model id and that the model is "
            f"enabled in the region, providers.{self.name}.region)"
        )

    def _detail(self, exc: anthropic.APIError) -> str:
        return self._redact(_vendor_message(exc))

    def _redact(self, text: str) -> str:
        if self._key:
            text = text.replace(self._key, "[redacted]")
        return _KEY_LIKE.sub("sk-[redacted]", text)

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
