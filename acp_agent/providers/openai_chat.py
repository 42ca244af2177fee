"""OpenAI Chat Completions, and the servers that speak it (Ollama, vLLM, LiteLLM, OpenRouter ...).

`OpenAIChatProvider` is the provider for every `OpenAIProviderConfig` (openai,
openai-compatible, azure-openai): a model configured with `api = "responses"` is streamed
through the Responses API (`openai_responses`), every other one through Chat Completions.
The request and stream mappers live in `_openai_chat_mapping`; the SDK client, the API key
and the translation of every vendor error in `_openai_client`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

from openai import omit
from openai._response import AsyncAPIResponse
from openai.types.chat import ChatCompletionChunk
from pydantic import ValidationError
from pydantic_core import from_json

from ..messages import StreamEvent, TextDelta
from ._openai_chat_mapping import (
    ChunkMapper,
    UnsupportedPart,
    plain_text,
    to_messages,
    to_tools,
)
from ._openai_client import VENDOR_ERRORS, OpenAIConnection
from .base import ModelRequest
from .errors import ProviderError, ProviderUnavailable
from .openai_responses import OpenAIResponsesProvider

if TYPE_CHECKING:
    from ..config import OpenAIProviderConfig


class OpenAIChatProvider:
    def __init__(self, name: str, config: OpenAIProviderConfig, env: Mapping[str, str]) -> None:
        self.name = name
        self._connection = OpenAIConnection(name, config, env)
        self._responses = OpenAIResponsesProvider(name, config, env, connection=self._connection)

    async def aclose(self) -> None:
        await self._connection.aclose()  # shared with the Responses provider

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        model = self._connection.model(request.model)
        if model is not None and model.api == "responses":
            return self._responses.stream(request)
        return self._chat(request)

    @asynccontextmanager
    async def _chat(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        connection = self._connection
        client = connection.client()
        try:
            messages = to_messages(request.system, request.messages)
        except UnsupportedPart as exc:
            raise ProviderError(self.name, f"cannot send this conversation: {exc}") from exc
        limit = request.max_output_tokens
        param = connection.config.max_tokens_param
        effort = _reasoning_effort(connection, request)
        try:
            # The raw body, parsed here: the SDK's typed stream spends ~0.2 ms building each
            # chunk object, which is most of the time of a fast stream.
            response = await client.chat.completions.with_streaming_response.create(
                model=request.model,
                messages=messages,
                tools=to_tools(request.tools) if request.tools else omit,
                stream=True,
                stream_options={"include_usage": True},
                max_tokens=limit if limit is not None and param == "max_tokens" else omit,
                max_completion_tokens=(
                    limit if limit is not None and param == "max_completion_tokens" else omit
                ),
                reasoning_effort=effort if effort is not None else omit,
            ).__aenter__()
        except VENDOR_ERRORS as exc:
            raise connection.translate(exc) from exc
        events = self._events(response)
        try:
            yield events
        finally:
            await events.aclose()
            await connection.close_quietly(response)

    async def _events(self, response: AsyncAPIResponse[Any]) -> AsyncGenerator[StreamEvent]:
        mapper = ChunkMapper()
        try:
            async for event_name, data in server_sent_events(response.iter_bytes()):
                if data.startswith(b"[DONE]"):
                    break
                if event_name == "error" or b'"error"' in data:
                    self._raise_if_error(data)
                text = _fast_text(data)
                if text is not None:
                    if text:
                        yield TextDelta(text)
                    continue
                for event in mapper.on_chunk(self._chunk(data)):
                    yield event
        except VENDOR_ERRORS as exc:
            raise self._connection.translate(exc) from exc
        if mapper.finish_reason is None:
            raise ProviderUnavailable(self.name, "stream ended before the model finished")
        if mapper.finish_reason == "error":
            raise ProviderUnavailable(self.name, "the model stopped with an error mid-stream")
        for event in mapper.finish():
            yield event

    def _chunk(self, data: bytes) -> ChatCompletionChunk:
        try:
            return ChatCompletionChunk.model_validate_json(data)
        except ValidationError:
            pass  # not JSON, or a compatible server's loose chunk (e.g. Azure's `object: ""`)
        try:
            payload = json.loads(data)
        except ValueError:
            sample = self._connection.redact(data[:120].decode(errors="replace"))
            raise ProviderError(
                self.name, f"the server sent a stream event that is not JSON: {sample!r}"
            ) from None
        return ChatCompletionChunk.construct(**payload)  # the SDK's own lenient building

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


def _fast_text(data: bytes) -> str | None:
    try:
        return plain_text(from_json(data))
    except ValueError:
        return None  # not JSON: the slow path reports it


async def server_sent_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[str, bytes]]:
    """(event name, data) for each server-sent event in a byte stream."""
    buffer = b""
    name, data = "", list[bytes]()
    async for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            line = line.rstrip(b"\r")
            if not line:
                if data:
                    yield name, b"\n".join(data)
                name, data = "", []
            elif line.startswith(b"data:"):
                data.append(line[5:].lstrip(b" "))
            elif line.startswith(b"event:"):
                name = line[6:].strip().decode()
    if data:
        yield name, b"\n".join(data)


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
