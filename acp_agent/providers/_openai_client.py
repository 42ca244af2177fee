"""What the Chat Completions and Responses providers share: the SDK client, the API key,
sending a request body and opening its stream (the skeleton in `_http_stream`), and what the
SDK's and the transport's errors report, handed to the one error table (`_error_table`).

Three kinds of endpoint, from `OpenAIProviderConfig.type`:

- `openai`: api.openai.com (or `base_url`), key from `OPENAI_API_KEY` unless configured;
- `openai-compatible`: any server speaking the API; a placeholder key when none is set
  (so does `openai` when `base_url` is a local server: Ollama, LM Studio, vLLM);
- `azure-openai`: `base_url` is the resource endpoint (https://NAME.openai.azure.com): model
  ids name deployments and every call carries `api-version`. A `base_url` ending in
  `/openai/v1` is Azure's versionless v1 API instead, which the plain client speaks.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, cast

import httpx2
import openai
from openai._base_client import make_request_options
from openai._constants import RAW_RESPONSE_HEADER
from openai._response import AsyncAPIResponse
from openai._utils import path_template

from ..local_addresses import is_local_url
from ..messages import StreamEvent
from ._error_table import Endpoint, Failure, error_for, timed_out, transport_error
from ._http_stream import open_stream
from ._transport import redact
from .errors import AuthError, ProviderError, login_fix

if TYPE_CHECKING:
    from ..config import ModelConfig, OpenAIProviderConfig

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
AZURE_KEY_ENV = "AZURE_OPENAI_API_KEY"
AZURE_API_VERSION = "2025-04-01-preview"
"""The oldest Azure API version with the Responses API, reasoning summaries and encrypted
reasoning; used when `api_version` is not configured."""
# Local servers (Ollama, vLLM) ignore the key, but the SDK refuses to send a request without one.
PLACEHOLDER_KEY = "not-needed"
STORED_KEY_ORIGIN = "`acp-agent login`"
"""Where a key came from when it was the one `acp-agent login` stored (the last resort)."""
# Everything `translate` knows; the SDK lets a malformed SSE data line escape as JSON errors.
VENDOR_ERRORS = (openai.OpenAIError, httpx2.HTTPError, json.JSONDecodeError)
_AZURE_V1_PATH = re.compile(r"/openai/v1/?$")
# The paths we call that Azure serves per deployment (`/deployments/{model}/...`).
_AZURE_DEPLOYMENT_PATHS = frozenset({"/chat/completions"})


class OpenAIConnection:
    """One provider's client (created on first use), its streams and its errors."""

    def __init__(self, name: str, config: OpenAIProviderConfig, env: Mapping[str, str]) -> None:
        self.name = name
        self.config = config
        self._env = env
        self._key: str | None = None
        self._key_origin: str | None = None
        """Where the key came from: a variable's name, the config key, None for the
        placeholder."""
        self._client: openai.AsyncOpenAI | None = None

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._key = self._api_key()
            self._client = self._make_client(self._key)
        return self._client

    def model(self, model_id: str) -> ModelConfig | None:
        """The configured model with this id, if any."""
        return next((model for model in self.config.models if model.id == model_id), None)

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def open_stream(
        self,
        send: Callable[[], Awaitable[AsyncAPIResponse[Any]]],
        events: Callable[[AsyncAPIResponse[Any]], AsyncGenerator[StreamEvent]],
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        """The stream skeleton (`_http_stream`) with this client's errors."""
        self.client()  # a missing key fails here, before any work
        return open_stream(self.name, send, events, errors=VENDOR_ERRORS, translate=self.translate)

    async def post_stream(
        self, path: str, body: bytes, *, model: str, cast_to: type[Any], stream_cls: type[Any]
    ) -> AsyncAPIResponse[Any]:
        """POST an encoded JSON body; the response comes back unread, to stream its bytes.

        This is what `create(...)` on the SDK's `with_streaming_response` does, minus the
        walk of the whole request through the SDK's parameter transform and its JSON
        encoding: the body comes encoded (most of it cached per message, see
        `_message_cache`). Headers, authentication, the URL, timeouts and the exceptions
        for error statuses are the SDK client's own.
        """
        client = self.client()
        if (
            path in _AZURE_DEPLOYMENT_PATHS
            and isinstance(client, openai.AsyncAzureOpenAI)
            and "/deployments" not in str(client.base_url.path)
        ):
            # What `AsyncAzureOpenAI._build_request` does to a body it can read.
            path = path_template("/deployments/{model}", model=model) + path
        options = make_request_options(
            extra_headers={RAW_RESPONSE_HEADER: "stream"}, security={"bearer_auth": True}
        )
        response = await client.post(
            path, cast_to=cast_to, content=body, options=options, stream=True, stream_cls=stream_cls
        )
        return cast(AsyncAPIResponse[Any], response)

    # --- client and key --------------------------------------------------------------------

    def _make_client(self, key: str) -> openai.AsyncOpenAI:
        config = self.config
        if config.type == "azure-openai" and not _AZURE_V1_PATH.search(self.base_url()):
            return openai.AsyncAzureOpenAI(
                azure_endpoint=self.base_url(),
                api_version=config.api_version or AZURE_API_VERSION,
                api_key=key,
                timeout=config.timeout,
                max_retries=0,
            )
        return openai.AsyncOpenAI(
            api_key=key,
            # Explicit, so OPENAI_BASE_URL cannot silently redirect a configured provider.
            base_url=self.base_url(),
            timeout=config.timeout,
            max_retries=0,
        )

    def _default_key_env(self) -> str:
        return AZURE_KEY_ENV if self.config.type == "azure-openai" else DEFAULT_KEY_ENV

    def _api_key(self) -> str:
        config = self.config
        if config.api_key:
            self._key_origin = f"providers.{self.name}.api_key"
            return config.api_key
        variable = config.api_key_env
        if variable is None and config.type != "openai-compatible":
            variable = self._default_key_env()
        if variable is not None and (key := self._env.get(variable)):
            self._key_origin = variable
            return key
        if (stored := config.stored_key()) is not None:
            self._key_origin = STORED_KEY_ORIGIN
            return stored
        local = is_local_url(self.base_url())
        if config.type == "openai-compatible" or local:
            # Local servers (Ollama, LM Studio, vLLM) ignore the key, but the SDK refuses to
            # send a request without one.
            unset = f"{variable} is not set" if variable else "no api_key_env configured"
            where = "a local server" if local else "an OpenAI-compatible server"
            log.info(
                "providers.%s: no API key (%s); %s is %s, so a placeholder key is sent",
                self.name,
                unset,
                self.base_url(),
                where,
            )
            return PLACEHOLDER_KEY
        variable = variable or self._default_key_env()
        raise AuthError(self.name, f"no API key: {variable} is not set", fix=self._key_fix())

    def _key_fix(self) -> str:
        config = self.config
        setting = f"providers.{self.name}.api_key_env"
        login = login_fix(self.name)
        if self._key_origin == STORED_KEY_ORIGIN:
            return f"log in again: `acp-agent login {self.name}` replaces the stored key"
        if self._key == PLACEHOLDER_KEY:
            return f"the server wants a key: name the variable that holds it in {setting}, {login}"
        if config.api_key_env:
            return f"set {config.api_key_env} (the variable {setting} names), {login}"
        if config.api_key:
            return f"check providers.{self.name}.api_key, or use {setting} instead"
        if config.type != "openai-compatible":
            return f"set {self._default_key_env()}, or name another variable in {setting}, {login}"
        return f"name the variable that holds the key in {setting}, {login}"

    def base_url(self) -> str:
        return self.config.base_url or DEFAULT_BASE_URL

    # --- errors ----------------------------------------------------------------------------

    def translate(self, exc: Exception) -> ProviderError:
        """What the SDK or the transport raised, as the error table's input."""
        endpoint = self._endpoint()
        match exc:
            case openai.APIStatusError():
                failure = Failure(
                    exc.status_code,
                    _error_code(exc.body),
                    _vendor_message(exc),
                    exc.response.headers,
                    str(exc.request.url),
                )
                return error_for(failure, endpoint)
            case openai.APITimeoutError():
                return timed_out(endpoint)
            case openai.APIConnectionError():
                return transport_error(exc.__cause__ or exc, endpoint)
            case openai.APIError():
                # An error event inside an otherwise successful stream.
                return self.stream_error(_error_code(exc.body), _vendor_message(exc))
            case httpx2.HTTPError() | json.JSONDecodeError():
                return transport_error(exc, endpoint)
        return ProviderError(self.name, self.redact(str(exc)) or type(exc).__name__)

    def stream_error(self, code: str | None, message: str) -> ProviderError:
        """An error the server reported inside a stream, classified by its code."""
        return error_for(Failure(None, code, message), self._endpoint())

    def _endpoint(self) -> Endpoint:
        deployment_hint = (
            "check that the model id names a deployment of this resource, and "
            f"providers.{self.name}.api_version"
        )
        return Endpoint(
            provider=self.name,
            base_url=self.base_url(),
            timeout=self.config.timeout,
            credentials=self._key_description(),
            fix=self._key_fix(),
            key=self._real_key(),
            not_found_hint=deployment_hint if self.config.type == "azure-openai" else None,
        )

    def _key_description(self) -> str:
        """Which key the server refused, by where it came from (never the key itself)."""
        if self._key == PLACEHOLDER_KEY:
            return "the placeholder key sent because none is configured"
        if self._key_origin is not None:
            return f"the key from {self._key_origin}"
        return "the credentials"

    def _real_key(self) -> str | None:
        return None if self._key == PLACEHOLDER_KEY else self._key

    def redact(self, text: str) -> str:
        return redact(text, self._real_key())


def _vendor_message(exc: openai.APIError) -> str:
    # The SDK hands over the `error` member of the body: an object for OpenAI and vLLM,
    # a bare string for Ollama, raw text for proxies that answer with HTML.
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


def _error_code(body: object) -> str | None:
    if not isinstance(body, Mapping):
        return None
    for key in ("code", "type"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
    return None
