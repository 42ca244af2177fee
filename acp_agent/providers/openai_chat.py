"""OpenAI Chat Completions, and the servers that speak it (Ollama, vLLM, LiteLLM, OpenRouter ...).

`OpenAIChatProvider` is the provider for every `OpenAIProviderConfig` (openai,
openai-compatible, azure-openai): a model configured with `api = "responses"` is streamed
through the Responses API (`openai_responses`), every other one through Chat Completions.
The request and stream mappers live in `_openai_chat_mapping`; the HTTP client, the API
key, the stream's open and close and what the vendor's errors report in `_openai_client`
(the error table in `_error_table` decides what they mean). Requests go out with httpx2 as
JSON built from each message's cached encoding (`_message_cache`), and the stream is read
as raw server-sent events (`_wire`) mapped from their decoded JSON: the `openai` SDK is not
imported at all (its typed request and stream objects cost more than everything else a turn
does once the conversation is long or the stream fast, and its import a second).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Literal

import httpx2
from pydantic_core import from_json

from ..messages import StreamEvent
from ._http_client import TRANSPORT_ERRORS
from ._http_stream import ended_early
from ._message_cache import ConvertedMessages
from ._openai_chat_mapping import (
    ChunkMapper,
    encode_message,
    system_messages,
    to_tools,
)
from ._openai_client import OpenAIConnection
from ._transport import checked_event_stream
from ._wire import body_with_list, dumps, server_sent_events
from .base import ModelRequest, model_inputs
from .errors import ProviderError, ProviderUnavailable
from .openai_responses import OpenAIResponsesProvider

if TYPE_CHECKING:
    from ..config import OpenAIProviderConfig


class OpenAIChatProvider:
    def __init__(self, name: str, config: OpenAIProviderConfig, env: Mapping[str, str]) -> None:
        self.name = name
        self._connection = OpenAIConnection(name, config, env)
        self._responses = OpenAIResponsesProvider(name, config, env, connection=self._connection)
        self._encoded: ConvertedMessages[bytes] = ConvertedMessages(encode_message)

    async def aclose(self) -> None:
        await self._connection.aclose()  # shared with the Responses provider

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        model = self._connection.model(request.model)
        if model is not None and model.api == "responses":
            return self._responses.stream(request)
        return self._chat(request)

    def _chat(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        return self._connection.open_stream(lambda: self._send(request), self._events)

    async def _send(self, request: ModelRequest) -> httpx2.Response:
        return await self._connection.post_stream(
            "/chat/completions", self._body(request), model=request.model
        )

    def _body(self, request: ModelRequest) -> bytes:
        """The JSON of `chat.completions.create(..., stream=True)` for this request."""
        connection = self._connection
        limit = request.max_output_tokens
        fields: dict[str, Any] = {"model": request.model, "stream": True}
        if limit is not None:
            fields[connection.config.max_tokens_param] = limit
        if (effort := _reasoning_effort(connection, request)) is not None:
            fields["reasoning_effort"] = effort
        if request.speed == "fast":
            fields["service_tier"] = "priority"
        fields["stream_options"] = {"include_usage": True}
        if request.tools:
            fields["tools"] = to_tools(request.tools)
        return body_with_list(fields, "messages", self._encoded_messages(request))

    def _encoded_messages(self, request: ModelRequest) -> list[bytes]:
        system = [dumps(message) for message in system_messages(request.system)]
        inputs = model_inputs(self._connection.config, request.model)
        return system + self._encoded.values(request.messages, inputs)

    async def _events(self, http: httpx2.Response) -> AsyncGenerator[StreamEvent]:
        mapper = ChunkMapper()
        try:
            chunks = checked_event_stream(self.name, http, http.aiter_bytes())
            async for event_name, data in server_sent_events(chunks):
                if data is None:
                    continue
                if data.startswith(b"[DONE]"):
                    break
                if event_name == "error" or b'"error"' in data:
                    self._raise_if_error(data)
                payload = self._chunk(data)
                events = mapper.on_payload(payload)
                for event in mapper.on_chunk(payload) if events is None else events:
                    yield event
        except TRANSPORT_ERRORS as exc:
            raise self._connection.translate(exc) from exc
        if mapper.finish_reason is None:
            raise ended_early(self.name)
        if mapper.finish_reason == "error":
            raise ProviderUnavailable(self.name, "the model stopped with an error mid-stream")
        for event in mapper.finish():
            yield event

    def _chunk(self, data: bytes) -> Any:
        try:
            return from_json(data)
        except ValueError:
            sample = self._connection.redact(data[:120].decode(errors="replace"))
            raise ProviderError(
                self.name, f"the server sent a stream event that is not JSON: {sample!r}"
            ) from None

    def _raise_if_error(self, data: bytes) -> None:
        """An error event inside the stream (OpenRouter, LiteLLM and OpenAI itself send them)."""
        payload = json.loads(data)
        error = payload.get("error") if isinstance(payload, dict) else None
        if error:
            detail = error if isinstance(error, dict) else {"message": str(error)}
            code = detail.get("code") or detail.get("type")
            raise self._connection.stream_error(
                str(code) if code else None, str(detail.get("message") or "")
            )


def _reasoning_effort(
    connection: OpenAIConnection, request: ModelRequest
) -> Literal["low", "medium", "high"] | None:
    """`reasoning_effort` for reasoning models: the request's level, unless off or unset."""
    level = request.thought_level
    if level is None or level == "off":
        return None
    model = connection.model(request.model)
    if model is not None and not model.reasoning:
        return None  # the config says this model takes no effort; the API would reject it
    return level
