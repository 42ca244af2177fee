"""OpenAI Chat Completions, and the servers that speak it (Ollama, vLLM, LiteLLM, OpenRouter ...).

`OpenAIChatProvider` is the provider for every `OpenAIProviderConfig` (openai,
openai-compatible, azure-openai): a model configured with `api = "responses"` is streamed
through the Responses API (`openai_responses`), every other one through Chat Completions.
The request and stream mappers live in `_openai_chat_mapping`; the SDK client, the API key
and the translation of every vendor error in `_openai_client`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Literal

from openai import AsyncStream, omit
from openai.types.chat import ChatCompletionChunk

from ..messages import StreamEvent
from ._openai_chat_mapping import ChunkMapper, UnsupportedPart, to_messages, to_tools
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
                reasoning_effort=effort if effort is not None else omit,
            )
        except VENDOR_ERRORS as exc:
            raise connection.translate(exc) from exc
        events = self._events(chunks)
        try:
            yield events
        finally:
            await events.aclose()
            await connection.close_quietly(chunks)

    async def _events(
        self, chunks: AsyncStream[ChatCompletionChunk]
    ) -> AsyncGenerator[StreamEvent]:
        mapper = ChunkMapper()
        try:
            async for chunk in chunks:
                for event in mapper.on_chunk(chunk):
                    yield event
        except VENDOR_ERRORS as exc:
            raise self._connection.translate(exc) from exc
        if mapper.finish_reason is None:
            raise ProviderUnavailable(self.name, "stream ended before the model finished")
        if mapper.finish_reason == "error":
            raise ProviderUnavailable(self.name, "the model stopped with an error mid-stream")
        for event in mapper.finish():
            yield event


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
