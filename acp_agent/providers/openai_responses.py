"""The OpenAI Responses API, for models configured with `api = "responses"`.

Stateless: every request carries the whole conversation (`store=false`), and reasoning
models get their encrypted reasoning items back (`include=["reasoning.encrypted_content"]`),
so nothing lives on the server between calls. The request and stream mappers live in
`_openai_responses_mapping`; the client and the error translation in `_openai_client`,
shared with Chat Completions (`openai_chat.OpenAIChatProvider` routes here per model).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from openai import AsyncStream, omit
from openai.types.responses import ResponseStreamEvent
from openai.types.shared_params import Reasoning

from ..messages import StreamEvent
from ._openai_chat_mapping import UnsupportedPart
from ._openai_client import VENDOR_ERRORS, OpenAIConnection
from ._openai_responses_mapping import ResponseEventMapper, ResponseFailed, to_input, to_tools
from .base import ModelRequest
from .errors import ProviderError, ProviderUnavailable

if TYPE_CHECKING:
    from ..config import OpenAIProviderConfig


class OpenAIResponsesProvider:
    def __init__(
        self,
        name: str,
        config: OpenAIProviderConfig,
        env: Mapping[str, str],
        *,
        connection: OpenAIConnection | None = None,
    ) -> None:
        self.name = name
        self._connection = connection or OpenAIConnection(name, config, env)

    async def aclose(self) -> None:
        await self._connection.aclose()

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        connection = self._connection
        client = connection.client()
        try:
            items = to_input(request.messages)
        except UnsupportedPart as exc:
            raise ProviderError(self.name, f"cannot send this conversation: {exc}") from exc
        model = connection.model(request.model)
        level = request.thought_level
        # Only reasoning models accept the include ("Encrypted content is not supported").
        reasoning_model = (model is not None and model.reasoning) or level is not None
        reasoning: Reasoning | None = None
        if level is not None and level != "off":
            reasoning = {"effort": level, "summary": "auto"}
        try:
            stream = await client.responses.create(
                model=request.model,
                input=items,
                instructions=request.system or omit,
                tools=to_tools(request.tools) if request.tools else omit,
                stream=True,
                store=False,
                include=["reasoning.encrypted_content"] if reasoning_model else omit,
                reasoning=reasoning if reasoning is not None else omit,
                max_output_tokens=(
                    request.max_output_tokens if request.max_output_tokens is not None else omit
                ),
            )
        except VENDOR_ERRORS as exc:
            raise connection.translate(exc) from exc
        events = self._events(stream)
        try:
            yield events
        finally:
            await events.aclose()
            await connection.close_quietly(stream)

    async def _events(
        self, stream: AsyncStream[ResponseStreamEvent]
    ) -> AsyncGenerator[StreamEvent]:
        mapper = ResponseEventMapper()
        try:
            async for event in stream:
                for neutral in mapper.on_event(event):
                    yield neutral
                if mapper.done:
                    break
        except ResponseFailed as exc:
            raise self._connection.stream_error(exc.code, exc.message) from exc
        except VENDOR_ERRORS as exc:
            raise self._connection.translate(exc) from exc
        if not mapper.done:
            raise ProviderUnavailable(self.name, "stream ended before the model finished")
        for neutral in mapper.finish():
            yield neutral
