"""`connection()`: a fresh agent served in-process, driven by a `FakeClient`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from fake_acp_client import TIMEOUT, FakeClient

from acp_agent.cli import agent_loader
from acp_agent.protocol.server import serve
from acp_agent.rpc.framing import StreamSink, StreamSource


@asynccontextmanager
async def _connection(config_path: str | None = None) -> AsyncIterator[FakeClient]:
    to_agent, agent_input = anyio.create_memory_object_stream[bytes](1024)
    agent_output, from_agent = anyio.create_memory_object_stream[bytes](1024)
    async with anyio.create_task_group() as tg:
        client = FakeClient(to_agent, tg)

        async def run_agent() -> None:
            async with agent_output:
                await serve(
                    StreamSource(agent_input),
                    StreamSink(agent_output),
                    load=agent_loader(config_path, {}),
                )

        tg.start_soon(run_agent)
        tg.start_soon(client.read_frames, from_agent)
        try:
            yield client
        finally:
            with anyio.fail_after(TIMEOUT, shield=True):
                await client.close()
            # serve() returns once its input ended; the reader then sees end of output.
    # Every frame the agent sent in the block, checked against the dialect's schema.
    assert not client.schema_problems, "\n\n".join(client.schema_problems)


@pytest.fixture
def connection() -> Callable[[], Any]:
    """`async with connection([config_path]) as client`: a fresh agent served for the block."""
    return _connection
