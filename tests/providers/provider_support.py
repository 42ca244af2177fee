"""What the provider tests share: recorded SSE streams served through respx (and framed as
Bedrock's binary event stream), the request body a route received, and collecting what a
provider streams."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import respx

from acp_agent.messages import StreamEvent, ToolSpec
from acp_agent.providers import ModelRequest, Provider

SSE = Path(__file__).parent / "sse"
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a text file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def sse(name: str) -> httpx.Response:
    """A 200 streaming the recorded file `sse/<name>` whole."""
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=(SSE / name).read_bytes()
    )


def sse_events(name: str) -> list[bytes]:
    """The events of `sse/<name>`, each with its blank line, to replay one by one."""
    return [event + b"\n\n" for event in (SSE / name).read_bytes().split(b"\n\n") if event]


def bedrock_frame(sse_event: bytes) -> bytes:
    """One server-sent event of Anthropic's API as the Bedrock message that carries it: a
    `chunk` event whose payload holds the event's JSON, base64-encoded."""
    data = b"\n".join(
        line.removeprefix(b"data:").strip()
        for line in sse_event.split(b"\n")
        if line.startswith(b"data:")
    )
    payload = json.dumps({"bytes": base64.b64encode(data).decode()}).encode()
    return event_stream_message(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
        payload,
    )


def bedrock_exception(kind: str, message: str) -> bytes:
    """The Bedrock message of an error inside the stream (`throttlingException` ...)."""
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return event_stream_message(headers, json.dumps({"message": message}).encode())


def event_stream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """A message of the AWS event stream encoding: prelude (lengths, CRC), string headers,
    payload, CRC of the whole."""
    encoded = b""
    for name, value in headers.items():
        name_bytes, value_bytes = name.encode(), value.encode()
        encoded += bytes([len(name_bytes)]) + name_bytes + b"\x07"  # 7: a string value
        encoded += struct.pack(">H", len(value_bytes)) + value_bytes
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


class RecordingStream(httpx.AsyncByteStream):
    """A response body that yields SSE events one by one and records being closed; with
    `hang`, it then goes silent (and says so: `silent`) until cancelled."""

    def __init__(
        self, events: Sequence[bytes], *, then: BaseException | None = None, hang: bool = False
    ) -> None:
        self.events = events
        self.then = then
        self.hang = hang
        self.closed = False
        self.silent = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for event in self.events:
            yield event
        if self.hang:
            self.silent.set()
            await anyio.sleep_forever()
        if self.then is not None:
            raise self.then

    async def aclose(self) -> None:
        self.closed = True


def sent_body(route: respx.Route, call: int = -1) -> dict[str, Any]:
    """The JSON body of a request the route received (the last by default)."""
    body: dict[str, Any] = json.loads(route.calls[call].request.content)
    return body


async def collect(
    provider: Provider, request: ModelRequest, *, into: list[StreamEvent] | None = None
) -> list[StreamEvent]:
    """Every event `provider` streams for `request`. With `into`, each is appended there as it
    comes, so a test still sees what came before the stream failed or was cancelled."""
    events: list[StreamEvent] = [] if into is None else into
    async with provider.stream(request) as stream:
        async for event in stream:
            events.append(event)
    return events


def collector(
    default: ModelRequest,
) -> Callable[..., Coroutine[Any, Any, list[StreamEvent]]]:
    """`collect`, with `default` as the request when none is given."""

    def collect_default(
        provider: Provider,
        request: ModelRequest = default,
        *,
        into: list[StreamEvent] | None = None,
    ) -> Coroutine[Any, Any, list[StreamEvent]]:
        return collect(provider, request, into=into)

    return collect_default
