"""OpenAI Chat Completions, and the servers that speak it (Ollama, vLLM, LiteLLM, OpenRouter ...).

The request and stream mappers live in `_openai_chat_mapping`; this module owns the SDK
client, the API key, the connection's lifetime and the translation of every vendor error.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import httpx2
import openai
from openai import AsyncStream, omit
from openai.types.chat import ChatCompletionChunk

from ..messages import StreamEvent
from ._openai_chat_mapping import ChunkMapper, UnsupportedPart, to_messages, to_tools
from .base import ModelRequest
from .errors import (
    AuthError,
    ContextWindowError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
)

if TYPE_CHECKING:
    from ..config import OpenAIProviderConfig

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
# Local servers (Ollama, vLLM) ignore the key, but the SDK refuses to send a request without one.
PLACEHOLDER_KEY = "not-needed"
# Closing a response only releases a socket; bounded so a stuck peer cannot stall a cancel.
_CLOSE_TIMEOUT = 2.0

# Everything `_translate` knows; the SDK lets a malformed SSE data line escape as JSON errors.
_VENDOR_ERRORS = (openai.OpenAIError, httpx2.HTTPError, json.JSONDecodeError)
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _](?:length|window|size)|maximum context|prompt is too long|too many tokens",
    re.IGNORECASE,
)
_KEY_LIKE = re.compile(r"\bsk-[\w*\-]{6,}")


class OpenAIChatProvider:
    def __init__(self, name: str, config: OpenAIProviderConfig, env: Mapping[str, str]) -> None:
        self.name = name
        self._config = config
        self._env = env
        self._key: str | None = None
        self._client: openai.AsyncOpenAI | None = None

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        client = self._get_client()
        try:
            messages = to_messages(request.system, request.messages)
        except UnsupportedPart as exc:
            raise ProviderError(self.name, f"cannot send this conversation: {exc}") from exc
        limit = request.max_output_tokens
        param = self._config.max_tokens_param
        try:
            chunks = await client.chat.completions.create(
                model=request.model,
                messages=messages,
                tools=to_tools(request.tools) if request.tools else omit,
                stream=True,
                stream_options={"include_usage": True},
                max_tokens=limit if limit is not None and param == "max_tokens" else omit,
                max_completion_tokens=(
                    limit if limit is not None and param == "max_completion_tokens" else omit
                ),
            )
        except _VENDOR_ERRORS as exc:
            raise self._translate(exc) from exc
        events = self._events(chunks)
        try:
            yield events
        finally:
            await events.aclose()
            # Shielded: a cancelled turn must still release the HTTP connection right away.
            with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                await chunks.close()

    async def _events(
        self, chunks: AsyncStream[ChatCompletionChunk]
    ) -> AsyncGenerator[StreamEvent]:
        mapper = ChunkMapper()
        try:
            async for chunk in chunks:
                for event in mapper.on_chunk(chunk):
                    yield event
        except _VENDOR_ERRORS as exc:
            raise self._translate(exc) from exc
        if mapper.finish_reason is None:
            raise ProviderUnavailable(self.name, "stream ended before the model finished")
        if mapper.finish_reason == "error":
            raise ProviderUnavailable(self.name, "the model stopped with an error mid-stream")
        for event in mapper.finish():
            yield event

    def _get_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._key = self._api_key()
            self._client = openai.AsyncOpenAI(
                api_key=self._key,
                # Explicit, so OPENAI_BASE_URL cannot silently redirect a configured provider.
                base_url=self._config.base_url or DEFAULT_BASE_URL,
                timeout=self._config.timeout,
                max_retries=0,
            )
        return self._client

    def _api_key(self) -> str:
        key = self._config.resolve_api_key(self._env)
        if key is None and self._config.type == "openai" and not self._config.api_key_env:
            key = self._env.get(DEFAULT_KEY_ENV) or None
        if key is not None:
            return key
        if self._config.type == "openai-compatible":
            return PLACEHOLDER_KEY
        variable = self._config.api_key_env or DEFAULT_KEY_ENV
        raise AuthError(self.name, f"no API key: {variable} is not set", fix=self._key_fix())

    def _key_fix(self) -> str:
        setting = f"providers.{self.name}.api_key_env"
        if self._config.api_key_env:
            return f"set {self._config.api_key_env} (the variable {setting} names)"
        if self._config.api_key:
            return f"check providers.{self.name}.api_key, or use {setting} instead"
        if self._config.type == "openai":
            return f"set {DEFAULT_KEY_ENV}, or name another variable in {setting}"
        return f"name the variable that holds the key in {setting}"

    def _translate(self, exc: Exception) -> ProviderError:
        """The one place where vendor and transport exceptions become `ProviderError`s."""
        name = self.name
        match exc:
            case openai.AuthenticationError() | openai.PermissionDeniedError():
                detail = self._detail(exc)
                message = f"the API refused the credentials (HTTP {exc.status_code}): {detail}"
                return AuthError(name, message, fix=self._key_fix())
            case openai.RateLimitError():
                return RateLimitError(name, f"rate limited (HTTP 429): {self._detail(exc)}")
            case openai.BadRequestError() if _is_context_overflow(exc):
                return ContextWindowError(
                    name, f"the conversation is too long for the model: {self._detail(exc)}"
                )
            case openai.InternalServerError():
                return ProviderUnavailable(
                    name, f"server error (HTTP {exc.status_code}): {self._detail(exc)}"
                )
            case openai.APIStatusError():
                return ProviderError(name, f"HTTP {exc.status_code}: {self._detail(exc)}")
            case openai.APITimeoutError():
                return ProviderUnavailable(
                    name,
                    f"no response within {self._config.timeout:g}s "
                    f"(raise providers.{name}.timeout if the model is slow)",
                )
            case openai.APIConnectionError():
                return ProviderUnavailable(name, self._connection_failed(exc.__cause__ or exc))
            case openai.APIError():
                # An error event inside an otherwise successful stream.
                return ProviderError(name, self._detail(exc))
            case httpx2.HTTPError():
                return ProviderUnavailable(name, self._connection_failed(exc))
            case json.JSONDecodeError():
                sample = self._redact(exc.doc[:120])
                return ProviderError(
                    name, f"the server sent a stream event that is not JSON: {sample!r}"
                )
        return ProviderError(name, self._redact(str(exc)) or type(exc).__name__)

    def _connection_failed(self, cause: BaseException) -> str:
        reason = self._redact(str(cause)) or type(cause).__name__
        return f"connection to {self._base_url()} failed: {reason}"

    def _detail(self, exc: openai.APIError) -> str:
        return self._redact(_vendor_message(exc))

    def _redact(self, text: str) -> str:
        if self._key and self._key != PLACEHOLDER_KEY:
            text = text.replace(self._key, "[redacted]")
        return _KEY_LIKE.sub("sk-[redacted]", text)

    def _base_url(self) -> str:
        return self._config.base_url or DEFAULT_BASE_URL


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


def _is_context_overflow(exc: openai.BadRequestError) -> bool:
    return exc.code == "context_length_exceeded" or bool(
        _CONTEXT_OVERFLOW.search(_vendor_message(exc))
    )
