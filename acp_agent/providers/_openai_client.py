"""What the Chat Completions and Responses providers share: the HTTP client, the API key,
sending a request body and opening its stream (the skeleton in `_http_stream`), and what
the server's and the transport's errors report, handed to the one error table
(`_error_table`).

Requests go out with httpx2 directly (`_http_client`), as the `openai` SDK would send them
(the same URL, authentication, `api-version` and JSON body): the SDK is never imported on
this path, which saves its second of imports before the first request.

Three kinds of endpoint, from `OpenAIProviderConfig.type`:

- `openai`: api.openai.com (or `base_url`), key from `OPENAI_API_KEY` unless configured;
  `OPENAI_ORG_ID` and `OPENAI_PROJECT_ID` are sent as the SDK sends them;
- `openai-compatible`: any server speaking the API; a placeholder key when none is set
  (so does `openai` when `base_url` is a local server: Ollama, LM Studio, vLLM);
- `azure-openai`: `base_url` is the resource endpoint (https://NAME.openai.azure.com): model
  ids name deployments, the key goes in `api-key` and every call carries `api-version`. A
  `base_url` ending in `/openai/v1` is Azure's versionless v1 API instead, which is called
  like any OpenAI-compatible server.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx2

from ..config import OpenAIProviderConfig
from ..local_addresses import is_local_url
from ..messages import StreamEvent
from ._error_table import Endpoint, Failure, error_for, http_error
from ._http_client import TRANSPORT_ERRORS, json_headers, post_stream
from ._http_stream import open_stream
from ._provider_client import ProviderClient
from ._transport import redact
from .errors import AuthError, ProviderError, key_fix, login_fix

if TYPE_CHECKING:
    from ..config import ModelConfig

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
AZURE_KEY_ENV = "AZURE_OPENAI_API_KEY"
AZURE_API_VERSION = "2025-04-01-preview"
"""The oldest Azure API version with the Responses API, reasoning summaries and encrypted
reasoning; used when `api_version` is not configured."""
# Local servers (Ollama, vLLM) ignore the key, but many proxies refuse a request without one.
PLACEHOLDER_KEY = "not-needed"
STORED_KEY_ORIGIN = "`acp-agent login`"
"""Where a key came from when it was the one `acp-agent login` stored (the last resort)."""
# The variables the SDK reads for the organization and project headers.
_ACCOUNT_HEADERS = {"OPENAI_ORG_ID": "OpenAI-Organization", "OPENAI_PROJECT_ID": "OpenAI-Project"}
_AZURE_V1_PATH = re.compile(r"/openai/v1/?$")
# The paths we call that Azure serves per deployment (`/deployments/{model}/...`).
_AZURE_DEPLOYMENT_PATHS = frozenset({"/chat/completions"})


class OpenAIConnection(ProviderClient[OpenAIProviderConfig]):
    """One provider's HTTP client (created on first use), its streams and its errors."""

    def model(self, model_id: str) -> ModelConfig | None:
        """The configured model with this id, if any."""
        return next((model for model in self.config.models if model.id == model_id), None)

    def open_stream(
        self,
        send: Callable[[], Awaitable[httpx2.Response]],
        events: Callable[[httpx2.Response], AsyncGenerator[StreamEvent]],
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        """The stream skeleton (`_http_stream`) with this client's errors."""
        self.client()  # a missing key fails here, before any work
        return open_stream(
            self.name, send, events, errors=TRANSPORT_ERRORS, translate=self.translate
        )

    async def post_stream(self, path: str, body: bytes, *, model: str) -> httpx2.Response:
        """POST an encoded JSON body to `path` (under the base URL); the response comes back
        unread, to stream its bytes. The body comes encoded (most of it cached per message,
        see `_message_cache`)."""
        client = self.client()
        params = None
        base = self.base_url().rstrip("/")
        if self._azure_deployments():
            base += "/openai"
            params = {"api-version": self.config.api_version or AZURE_API_VERSION}
            if path in _AZURE_DEPLOYMENT_PATHS and "/deployments" not in base:
                path = f"/deployments/{quote(model, safe='')}{path}"
        return await post_stream(
            client, base + path, headers=self._headers, content=body, params=params
        )

    # --- client and key --------------------------------------------------------------------

    def _azure_deployments(self) -> bool:
        """Azure's deployment API (not its versionless v1 API, called like OpenAI's)."""
        return self.config.type == "azure-openai" and not _AZURE_V1_PATH.search(self.base_url())

    def _request_headers(self, key: str | None) -> dict[str, str]:
        """What the SDK's client sends with every request; no credentials without a key."""
        headers = json_headers()
        if key is None:
            return headers
        if self._azure_deployments():
            headers["api-key"] = key
            return headers
        headers["Authorization"] = f"Bearer {key}"
        for variable, header in _ACCOUNT_HEADERS.items():
            if value := self._env.get(variable):
                headers[header] = value
        return headers

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
            # Local servers (Ollama, LM Studio, vLLM) ignore the key; a placeholder keeps
            # proxies that want some key content.
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
        if self._key == PLACEHOLDER_KEY:
            setting = f"providers.{self.name}.api_key_env"
            login = login_fix(self.name)
            return f"the server wants a key: name the variable that holds it in {setting}, {login}"
        return key_fix(
            self.name,
            stored=self._key_origin == STORED_KEY_ORIGIN,
            api_key_env=config.api_key_env,
            api_key=bool(config.api_key),
            default_env=None if config.type == "openai-compatible" else self._default_key_env(),
        )

    def base_url(self) -> str:
        return self.config.base_url or DEFAULT_BASE_URL

    # --- errors ----------------------------------------------------------------------------

    def translate(self, exc: Exception) -> ProviderError:
        """What the server or the transport reported, as the error table's input."""
        if (known := http_error(exc, self._endpoint(), _read_error_body)) is not None:
            return known
        return ProviderError(self.name, self.redact(str(exc)) or type(exc).__name__)

    def stream_error(self, code: str | None, message: str) -> ProviderError:
        """An error the server reported inside a stream, classified by its code."""
        return error_for(Failure(None, code, message), self._endpoint())

    def _endpoint(self) -> Endpoint:
        deployment_hint = (
            "check that the model id names a deployment of this resource, and "
            f"providers.{self.name}.api_version"
        )
        return self._endpoint_at(
            self.base_url(),
            lambda: (self._key_description(), self._key_fix(), self._real_key()),
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


def _read_error_body(body: object, fallback: str) -> tuple[str | None, str]:
    # OpenAI and vLLM answer {"error": {...}}, Ollama {"error": "..."}.
    return error_parts(body.get("error", body) if isinstance(body, Mapping) else body, fallback)


def error_parts(error: object, fallback: str) -> tuple[str | None, str]:
    """The code and message of an `error` the server sent (an object, a bare string, or a
    proxy's text); `fallback` when it says nothing readable."""
    if isinstance(error, Mapping):
        message = error.get("message")
        return _error_code(error), message if isinstance(message, str) and message else fallback
    if isinstance(error, str) and error.strip():
        return None, error.strip()[:500]
    return None, fallback


def _error_code(body: Mapping[str, object]) -> str | None:
    for key in ("code", "type"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
    return None
