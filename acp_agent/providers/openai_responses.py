"""The OpenAI Responses API, for models configured with `api = "responses"`.

Stateless: every request carries the whole conversation (`store=false`), and reasoning
models get their encrypted reasoning items back (`include=["reasoning.encrypted_content"]`),
so nothing lives on the server between calls. The request and stream mappers live in
`_openai_responses_mapping`; the client, the stream's open and close and the errors in
`_openai_client`, shared with Chat Completions (`openai_chat.OpenAIChatProvider` routes
here per model).

As on the Chat Completions path, requests go out with httpx2 as JSON built from each
message's cached encoding, and the stream is read as raw server-sent events: the hot delta
events straight from their JSON, every other one built by the SDK's own lenient
`construct_type` (`_openai_sdk`, imported on the first such event, in a worker thread while
the request is on its way), exactly as its typed stream would (`_events` mirrors
`openai.AsyncStream`, errors included).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import httpx2

from ..messages import StreamEvent
from . import _lazy_import
from ._http_client import TRANSPORT_ERRORS
from ._http_stream import ended_early
from ._message_cache import ConvertedMessages
from ._openai_client import OpenAIConnection, error_parts
from ._openai_responses_mapping import (
    ResponseEventMapper,
    ResponseFailed,
    encode_input,
    to_tools,
)
from ._transport import checked_event_stream
from ._wire import body_with_list, loads, server_sent_events
from .base import ModelRequest, model_inputs

if TYPE_CHECKING:
    from ..config import OpenAIProviderConfig

_SDK = "acp_agent.providers._openai_sdk"


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
        self._encoded: ConvertedMessages[bytes] = ConvertedMessages(encode_input)

    async def aclose(self) -> None:
        await self._connection.aclose()

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        return self._connection.open_stream(lambda: self._send(request), self._events)

    async def _send(self, request: ModelRequest) -> httpx2.Response:
        _lazy_import.start(_SDK)  # the stream's rarer events need it: import it meanwhile
        return await self._connection.post_stream(
            "/responses", self._body(request), model=request.model
        )

    def _body(self, request: ModelRequest) -> bytes:
        """The JSON of `responses.create(..., stream=True)` for this request."""
        model = self._connection.model(request.model)
        level = request.thought_level
        fields: dict[str, Any] = {"model": request.model}
        if request.system:
            fields["instructions"] = request.system
        if request.tools:
            fields["tools"] = to_tools(request.tools)
        fields["stream"] = True
        fields["store"] = False
        # Only reasoning models accept the include ("Encrypted content is not supported").
        if (model is not None and model.reasoning) or level is not None:
            fields["include"] = ["reasoning.encrypted_content"]
        if level is not None and level != "off":
            fields["reasoning"] = {"effort": level, "summary": "auto"}
        if request.max_output_tokens is not None:
            fields["max_output_tokens"] = request.max_output_tokens
        if request.speed == "fast":
            fields["service_tier"] = "priority"
        inputs = model_inputs(self._connection.config, request.model)
        return body_with_list(fields, "input", self._encoded.values(request.messages, inputs))

    async def _events(self, http: httpx2.Response) -> AsyncGenerator[StreamEvent]:
        mapper = ResponseEventMapper()
        chunks = checked_event_stream(self.name, http, http.aiter_bytes())
        try:
            async for _, data in server_sent_events(chunks):
                if data is not None and data.startswith(b"[DONE]"):
                    break
                payload = loads(data or b"")
                if type(payload) is dict and payload.get("error"):
                    raise self._stream_error(payload["error"])
                events = mapper.on_payload(payload)
                if events is None:
                    await _lazy_import.finish(_SDK)
                    from ._openai_sdk import response_event

                    events = mapper.on_event(response_event(payload))
                for neutral in events:
                    yield neutral
                if mapper.done:
                    break
        except ResponseFailed as exc:
            raise self._connection.stream_error(exc.code, exc.message) from exc
        except TRANSPORT_ERRORS as exc:
            raise self._connection.translate(exc) from exc
        if not mapper.done:
            raise ended_early(self.name)
        for neutral in mapper.finish():
            yield neutral

    def _stream_error(self, error: Any) -> Exception:
        """What `openai.AsyncStream` raises for an event that carries an `error`."""
        code, message = error_parts(error, "An error occurred during streaming")
        return self._connection.stream_error(code, message)
