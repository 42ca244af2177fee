"""An MCP server's huge result over the wire, in-process (the agent on memory streams, a real
server: tests/mcp_servers/huge.py): the model, the session's log and the editor's frames get
the head and the tail, never the whole. And trust comes from the config only: the editor's
server is trusted when the config trusts a server of its name that runs the same command.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_protocol_mcp import agent_text, open_session, run

from acp_agent.sessions.store import default_state_dir

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

HUGE_SCRIPT = Path(__file__).resolve().parent.parent / "mcp_servers" / "huge.py"
HUGE = 5_000_000
BOUND = 64_000
"""Far above the 30,000 characters the model reads, far below the result."""


def huge_server() -> dict[str, Any]:
    """huge.py as the editor gives it (ACP `McpServerStdio`)."""
    return {"name": "huge", "command": sys.executable, "args": [str(HUGE_SCRIPT)], "env": []}


def config(tmp_path: Path, *, trusted: bool, args: list[str] | None = None) -> str:
    """An echo agent whose config names a `huge` server (trusted or not)."""
    entry = {"command": sys.executable, "args": args or [str(HUGE_SCRIPT)], "trusted": trusted}
    lines = ['[providers.echo]\ntype = "echo"\n', "[mcp_servers.huge]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    path = tmp_path / "agent.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


async def test_a_huge_result_is_cut_for_the_model_the_log_and_the_editor(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection(config(tmp_path, trusted=True)) as client:
        sid, _ = await open_session(client, tmp_path, huge_server())
        call = json.dumps({"size": HUGE, "kind": "text"})
        assert await run(client, sid, f"@tool mcp__huge__huge {call}") == "end_turn"
        told = agent_text(client, sid)
        frames = [len(json.dumps(frame)) for frame in client.frames]

    # The echo model reports what the tool returned: what the model read.
    assert "Tool mcp__huge__huge returned:\nHEADxxx" in told
    assert "characters from the middle were left out" in told and "xxxTAIL" in told
    assert len(told) < BOUND
    assert max(frames) < BOUND, max(frames)
    [log] = default_state_dir().rglob(f"*{sid}*.jsonl")
    # The cut result is logged a few times (what the model read, what the editor was shown,
    # the echo model's report of it): each bounded, all far below the 5 MB result.
    assert log.stat().st_size < 5 * BOUND
    stored = log.read_text(encoding="utf-8")
    assert "HEADxxx" in stored and "xxxTAIL" in stored
    # The editor's server is the config's trusted one (same command): its read runs unasked.
    assert client.agent_requests_for("session/request_permission") == []


@pytest.mark.parametrize("listed", ["untrusted", "other args", "not in the config"])
async def test_an_editors_server_the_config_does_not_trust_asks_even_for_a_read(
    connection: Connection, tmp_path: Path, listed: str
) -> None:
    match listed:
        case "untrusted":
            path = config(tmp_path, trusted=False)
        case "other args":
            path = config(tmp_path, trusted=True, args=[str(HUGE_SCRIPT), "--other"])
        case _:
            path = None
    async with connection(path) as client:
        sid, _ = await open_session(client, tmp_path, huge_server())
        call = json.dumps({"size": 100, "kind": "text"})
        assert await run(client, sid, f"@tool mcp__huge__huge {call}") == "end_turn"

    [asked] = client.agent_requests_for("session/request_permission")
    assert asked["toolCall"]["title"] == "huge: huge"
    assert asked["toolCall"]["kind"] == "other"
