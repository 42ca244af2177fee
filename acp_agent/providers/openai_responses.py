"""The OpenAI Responses API, for models configured with `api = "responses"`.

Stateless: every request carries the whole conversation (`store=false`), and reasoning
models get their encrypted reasoning items back (`include=["reasoning.encrypted_content"]`),
so nothing lives on the server between calls. The request and stream mappers live in
`_openai_responses_mapping`; the client, the stream's open and close and the errors in
`_openai_client`, shared with Chat Completions (`openai_chat.OpenAIChatProvider` routes
here per model).

As on the Chat Completions path, requests go out as JSON built from each message's cached
encoding, and the stream is read as raw server-sent events: the hot delta events straight
from their JSON, every other one built by the SDK's own lenient `construct_type`, exactly
as its typed stream would (`_events` mirrors `openai.AsyncStream`, errors included).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, cast

import openai
from openai import AsyncStream
from openai._httpx2 import request_exceptions, timeout_exceptions
from openai._models import construct_type
from openai._response import AsyncAPIResponse
from openai.types.responses import Response, ResponseStreamEvent

from ..messages import StreamEvent
from ._http_stream import ended_early
from ._message_cache import ConvertedMessages
from ._openai_client import VENDOR_ERRORS, OpenAIConnection
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

    async def _send(self, request: ModelRequest) -> AsyncAPIResponse[Any]:
        return await self._connection.post_stream(
            "/responses",
            self._body(request),
            model=request.model,
            cast_to=Response,
            stream_cls=AsyncStream[ResponseStreamEvent],
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
        inputs = model_inputs(self._connection.config, request.model)
        return body_with_list(fields, "input", self._encoded.values(request.messages, inputs))

    async def _events(self, response: AsyncAPIResponse[Any]) -> AsyncGenerator[StreamEvent]:
        mapper = ResponseEventMapper()
        try:
            async for _, data in server_sent_events(_sdk_errors(self.name, response)):
                if data is not None and data.startswith(b"[DONE]"):
                    break
                payload = loads(data or b"")
                if type(payload) is dict and payload.get("error"):
                    raise _stream_error(response, payload["error"])
                events = mapper.on_payload(payload)
                if events is None:
                    event = construct_type(type_=ResponseStreamEvent, value=payload)
                    events = mapper.on_event(cast(ResponseStreamEvent, event))
                for neutral in events:
                    yield neutral
                if mapper.done:
                    break
        except ResponseFailed as exc:
            raise self._connection.stream_error(exc.code, exc.message) from exc
        except VENDOR_ERRORS as exc:
            raise self._connection.translate(exc) from exc
        if not mapper.done:
            raise ended_early(self.name)
        for neutral in mapper.finish():
            yield neutral


async def _sdk_errors(name: str, response: AsyncAPIResponse[Any]) -> AsyncIterator[bytes]:
    """The body's bytes, its transport errors raised as the SDK's stream raises them (and
    a body that is not an event stream refused, see `_transport`)."""
    http = response.http_response
    try:
        async for chunk in checked_event_stream(name, http, http.aiter_bytes()):
            yield chunk
    except timeout_exceptions() as err:
        raise openai.APITimeoutError(request=http.request) from err
    except request_exceptions() as err:
        raise openai.APIConnectionError(request=http.request) from err


def _stream_error(response: AsyncAPIResponse[Any], error: Any) -> openai.APIError:
    """What `openai.AsyncStream` raises for an event that carries an `error`."""
    message = error.get("message") if isinstance(error, Mapping) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    return openai.APIError(message=message, request=response.http_response.request, body=error)
