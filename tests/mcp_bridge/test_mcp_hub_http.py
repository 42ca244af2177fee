"""The hub against a real MCP server over streamable HTTP and over SSE on 127.0.0.1."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

import anyio
import pytest
from mcp_bridge_support import Changes, WebServer

from acp_agent.mcp_bridge import HubHandlers, McpHub, McpProgress, McpServerSpec
from acp_agent.messages import TextPart

pytestmark = pytest.mark.anyio

TRANSPORTS: list[Literal["http", "sse"]] = ["http", "sse"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_web_server_connects_and_its_tools_answer(
    tmp_path: Path, transport: Literal["http", "sse"]
) -> None:
    async with WebServer(transport) as web:
        spec = McpServerSpec("web", transport=transport, url=web.url, headers={"X-Team": "blue"})
        async with McpHub([spec], cwd=tmp_path) as hub:
            [status] = hub.statuses()
            assert status.state == "ready", status.describe()
            assert status.where == f"{transport} {web.url}"
            assert hub.find_tool("mcp__web__echo") is not None
            echoed = await hub.call_tool("web", "echo", {"text": "over the wire"})
            assert echoed.content == (TextPart("over the wire"),)
            header = await hub.call_tool("web", "header", {"name": "X-Team"})
            assert header.text == "blue"
            greeting = await hub.get_prompt("web", "greet", {"name": "Ada"})
            assert greeting.messages[0].text == "Please greet Ada warmly."


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_progress_and_cancellation_work_over_the_web(
    tmp_path: Path, transport: Literal["http", "sse"]
) -> None:
    reported = anyio.Event()
    progress: list[McpProgress] = []

    async def on_progress(report: McpProgress) -> None:
        progress.append(report)
        reported.set()

    async with WebServer(transport) as web:
        spec = McpServerSpec("web", transport=transport, url=web.url)
        async with McpHub([spec], cwd=tmp_path) as hub:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await hub.call_tool("web", "slow", {}, on_progress=on_progress)

                tg.start_soon(call)
                with anyio.fail_after(10):
                    await reported.wait()
                tg.cancel_scope.cancel()
            assert progress == [McpProgress(1.0, 10.0, "warming up")]
            with anyio.fail_after(10):
                assert (await hub.call_tool("web", "was_cancelled", {})).text == "cancelled"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tools_list_changed_arrives_over_the_web(
    tmp_path: Path, transport: Literal["http", "sse"]
) -> None:
    changes = Changes()
    async with WebServer(transport) as web:
        spec = McpServerSpec("web", transport=transport, url=web.url)
        async with McpHub([spec], cwd=tmp_path, handlers=HubHandlers(on_change=changes)) as hub:
            await hub.call_tool("web", "grow", {})
            await changes.wait_for("web", "ready", tool="mcp__web__grown")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_unreachable_url_is_reported_promptly(
    tmp_path: Path, transport: Literal["http", "sse"]
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    spec = McpServerSpec("gone", transport=transport, url=f"http://127.0.0.1:{port}/mcp")
    async with McpHub([spec], cwd=tmp_path, connect_timeout=5.0) as hub:
        [status] = hub.statuses()
    assert status.state == "failed"
    assert status.error is not None and f"127.0.0.1:{port}" in status.error
    assert "did not connect" not in status.error
