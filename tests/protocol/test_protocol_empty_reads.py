"""A client that answers a read of a missing file with empty content (Toad, CodeCompanion):
the disk decides, so a new file is created (a diff without `oldText`, `created: true`) and
a read of it says the file does not exist."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient

pytestmark = pytest.mark.anyio

Connection = Callable[[], Any]


def tool(name: str, **arguments: Any) -> str:
    return f"@tool {name} {json.dumps(arguments)}"


def finished_updates(client: FakeClient, session_id: str) -> list[dict[str, Any]]:
    return [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    ]


async def test_a_new_file_through_such_a_client_is_created_and_a_read_of_it_missing(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        client.missing_files_read_empty = True
        session_id = await client.new_session(tmp_path)
        await client.prompt(session_id, tool("read_file", path="notes.txt"))
        await client.prompt(session_id, tool("write_file", path="notes.txt", content="hi\n"))
        asked = client.agent_requests_for("session/request_permission")

    read, written = finished_updates(client, session_id)
    assert read["status"] == "failed"
    assert "the file does not exist" in json.dumps(read["content"])
    assert written["status"] == "completed"
    assert written["rawOutput"]["created"] is True
    [diff] = [c for c in written["content"] if c["type"] == "diff"]
    assert "oldText" not in diff and diff["newText"] == "hi\n"
    [question] = asked
    [preview] = [c for c in question["toolCall"]["content"] if c["type"] == "diff"]
    assert "oldText" not in preview
    assert question["toolCall"]["title"] == "Write notes.txt"
    assert (tmp_path / "notes.txt").read_text() == "hi\n"
