"""An image read by `read_file` end to end: the SDK client drives `python -m acp_agent`, the
fake model calls read_file on a PNG in the workspace, and its next request carries the image
(Chat Completions: a data URL in the user message after the tool message)."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import pytest
from acp.schema import ToolCallProgress, ToolCallStart
from fake_llm import FakeLLM
from PIL import Image
from test_e2e_sdk_client import prompt, running_agent

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


async def test_a_png_read_by_read_file_reaches_the_model_as_an_image(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    picture = io.BytesIO()
    Image.new("RGB", (32, 24), "orange").save(picture, "PNG")
    # Named like text: the bytes say what it is.
    (workspace / "screenshot.dat").write_bytes(picture.getvalue())
    call = '[[tool read_file {"path": "screenshot.dat"}]]'

    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=prompt(call)), 10
        )

    assert result.stop_reason == "end_turn"
    assert client.reads == [], "the editor's fs serves text: the image is read from disk"
    updates = client.of(session.session_id)
    [start] = [u for u in updates if isinstance(u, ToolCallStart)]
    assert start.kind == "read"
    finished = [u for u in updates if isinstance(u, ToolCallProgress) and u.status]
    assert finished[-1].status == "completed"
    assert finished[-1].raw_output["mime_type"] == "image/png"  # type: ignore[index]

    _, second = fake_llm.requests
    *_, tool, images = second["messages"]
    assert tool["role"] == "tool"
    assert f"{workspace / 'screenshot.dat'}: image/png 32x24" in tool["content"]
    data_url = "data:image/png;base64," + base64.b64encode(picture.getvalue()).decode()
    assert images == {
        "role": "user",
        "content": [
            {"type": "text", "text": f"[tool call {tool['tool_call_id']} returned:]"},
            {"type": "image_url", "image_url": {"url": data_url}},
        ],
    }
