"""An MCP prompt typed as a slash command (`/box:greet Ada`) takes its place in the session's
queue when its frame is read, like any prompt: a prompt read after it waits for it, and a
cancel read after it cancels it. The frames go in one write, so only their order orders
them. The server is real (tests/mcp_servers/everything.py over stdio).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]
SERVER_START_SECONDS = 120.0
"""A loaded machine takes seconds to import the MCP server."""

EVERYTHING = Path(__file__).resolve().parent.parent / "mcp_servers" / "everything.py"
CONFIG = """
default_model = "echo/echo"
mcp_connect_timeout = 120.0

[providers.echo]
type = "echo"
models = [{ id = "echo" }]
"""


@pytest.fixture
def config_file(tmp_path: Path) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return str(path)


async def session_with_prompts(client: FakeClient, cwd: Path) -> str:
    """A session whose server's prompts are announced as commands."""
    await client.initialize()
    box = {"name": "box", "command": sys.executable, "args": [str(EVERYTHING)], "env": []}
    request_id = await client.start_request("session/new", {"cwd": str(cwd), "mcpServers": [box]})
    reply = await client.wait_for(
        lambda f: f.get("id") == request_id and "method" not in f, within=SERVER_START_SECONDS
    )
    session_id: str = reply["result"]["sessionId"]
    await client.wait_for(
        lambda f: any(
            c["name"] == "box:greet"
            for c in f.get("params", {}).get("update", {}).get("availableCommands", ())
        )
    )
    return session_id


def prompt(client: FakeClient, session_id: str, text: str) -> tuple[int, dict[str, Any]]:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return client.next_request("session/prompt", params)


def reply_index(client: FakeClient, request_id: int) -> int:
    return next(
        i for i, f in enumerate(client.frames) if f.get("id") == request_id and "method" not in f
    )


def agent_text(client: FakeClient, session_id: str) -> str:
    return "".join(
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


async def test_a_prompt_read_after_an_mcp_prompt_command_waits_for_it(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await session_with_prompts(client, tmp_path)
        greet_id, greet = prompt(client, session_id, "/box:greet Ada")
        after_id, after = prompt(client, session_id, "after the greeting")
        await client.send_together(greet, after)
        greet_reply = await client.reply(greet_id)
        after_reply = await client.reply(after_id)
        text = agent_text(client, session_id)

    assert greet_reply["result"] == {"stopReason": "end_turn"}
    assert after_reply["result"] == {"stopReason": "end_turn"}
    assert reply_index(client, greet_id) < reply_index(client, after_id)
    greeting = text.index("Echo: Please greet Ada warmly.")
    assert greeting < text.index("Echo: after the greeting")


async def test_a_cancel_read_right_after_an_mcp_prompt_command_cancels_it(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await session_with_prompts(client, tmp_path)
        greet_id, greet = prompt(client, session_id, "/box:greet Ada")
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        await client.send_together(greet, cancel)
        greet_reply = await client.reply(greet_id)
        after = await client.prompt(session_id, "the session goes on")
        text = agent_text(client, session_id)

    assert greet_reply["result"] == {"stopReason": "cancelled"}
    assert "greet Ada" not in text
    assert after["result"] == {"stopReason": "end_turn"}
    assert text.endswith("Echo: the session goes on")
