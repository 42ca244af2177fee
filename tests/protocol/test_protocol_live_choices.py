"""Mode, model and thought level apply live: a switch while a turn runs changes that turn."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient, selected

pytestmark = pytest.mark.anyio

Connection = Callable[[], Any]


def tool_statuses(client: FakeClient, session_id: str) -> list[str]:
    return [
        u["status"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update" and "status" in u
    ]


async def test_switching_to_read_only_while_a_write_awaits_approval_stops_that_write(
    connection: Connection, tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)

        async def switch_then_allow(params: dict[str, Any]) -> dict[str, Any]:
            await client.call("session/set_mode", {"sessionId": session_id, "modeId": "read-only"})
            return selected("allow_once")

        client.permission_answer = switch_then_allow
        arguments = json.dumps({"path": str(target), "content": "late write"})
        reply = await client.prompt(session_id, f"@tool write_file {arguments}")

    assert reply["result"] == {"stopReason": "end_turn"}
    assert not target.exists()
    assert tool_statuses(client, session_id)[-1] == "failed"
