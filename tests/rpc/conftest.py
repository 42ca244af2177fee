"""An `Endpoint` served over crossed memory streams, and the raw wire its peer holds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from acp_agent.rpc.endpoint import Endpoint, Handler
from acp_agent.rpc.framing import StreamSink, StreamSource, read_lines

TIMEOUT = 5.0


class Wire:
    """The peer's end: raw bytes or JSON messages in, parsed frames out."""

    def __init__(
        self,
        to_endpoint: MemoryObjectSendStream[bytes],
        from_endpoint: MemoryObjectReceiveStream[bytes],
    ) -> None:
        self._to_endpoint = to_endpoint
        self._frames = read_lines(StreamSource(from_endpoint))

    async def send_bytes(self, data: bytes) -> None:
        await self._to_endpoint.send(data)

    async def send(self, message: Any) -> None:
        await self.send_bytes(json.dumps(message).encode() + b"\n")

    async def request(self, request_id: int | str, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def receive_raw(self) -> bytes:
        """The next frame as sent, without its newline."""
        with anyio.fail_after(TIMEOUT):
            return await anext(self._frames)

    async def receive(self) -> dict[str, Any]:
        message = json.loads(await self.receive_raw())
        assert isinstance(message, dict)
        return message

    async def close(self) -> None:
        """End the endpoint's input."""
        await self._to_endpoint.aclose()


Serving = Callable[..., AbstractAsyncContextManager[tuple[Endpoint, Wire]]]


@asynccontextmanager
async def _serving(
    handler: Handler, **endpoint_options: Any
) -> AsyncIterator[tuple[Endpoint, Wire]]:
    drain_timeout = endpoint_options.pop("drain_timeout", 0.1)
    to_endpoint, endpoint_input = anyio.create_memory_object_stream[bytes](1024)
    endpoint_output, from_endpoint = anyio.create_memory_object_stream[bytes](1024)
    endpoint = Endpoint(
        StreamSource(endpoint_input), StreamSink(endpoint_output), **endpoint_options
    )
    wire = Wire(to_endpoint, from_endpoint)
    async with anyio.create_task_group() as tg:

        async def serve() -> None:
            await endpoint.serve(handler, drain_timeout=drain_timeout)
            await endpoint_output.aclose()

        tg.start_soon(serve)
        try:
            yield endpoint, wire
        finally:
            with anyio.fail_after(TIMEOUT, shield=True):
                await wire.close()


@pytest.fixture
def serving() -> Serving:
    """`async with serving(handler) as (endpoint, wire)`: serves until the block ends."""
    return _serving
