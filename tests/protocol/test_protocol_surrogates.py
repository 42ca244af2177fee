"""A lone surrogate in a prompt (`"\\ud800"` is valid JSON, but no UTF-8 can carry it) reaches
the session as U+FFFD, read at the frame: the prompt is answered, the log holds what memory
holds, and a reload shows the same conversation. An escaped pair stays its one character.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient

from acp_agent.sessions.store import default_state_dir

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

LONE = "before \ud800 after"
PAIR = "smile \ud83d\ude00"


def user_texts(client: FakeClient, session_id: str, start: int = 0) -> list[str]:
    return [
        frame["params"]["update"]["content"]["text"]
        for frame in client.frames[start:]
        if frame.get("method") == "session/update"
        and frame["params"]["sessionId"] == session_id
        and frame["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]


def agent_text(client: FakeClient, session_id: str, start: int = 0) -> str:
    return "".join(
        frame["params"]["update"]["content"]["text"]
        for frame in client.frames[start:]
        if frame.get("method") == "session/update"
        and frame["params"]["sessionId"] == session_id
        and frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def test_a_lone_surrogate_becomes_u_fffd_in_the_answer_the_log_and_a_reload(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        sid = await client.new_session(tmp_path)
        first = await client.prompt(sid, LONE)  # FakeClient escapes it: "\ud800"
        echoed = agent_text(client, sid)
        second = await client.prompt(sid, PAIR)
        echoed_pair = agent_text(client, sid)[len(echoed) :]

    assert first.get("result", {}).get("stopReason") == "end_turn", first
    assert second.get("result", {}).get("stopReason") == "end_turn", second
    assert "before \ufffd after" in echoed
    assert "smile \U0001f600" in echoed_pair
    [log] = default_state_dir().rglob(f"*{sid}*.jsonl")
    stored = log.read_text(encoding="utf-8")
    assert "before \ufffd after" in stored or "before \\ufffd after" in stored
    assert "\ud800" not in stored and "\\ud800" not in stored

    async with connection() as client:
        await client.initialize()
        start = len(client.frames)
        reply = await client.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )
        assert "error" not in reply, reply
        replayed = user_texts(client, sid, start)
        assert agent_text(client, sid, start) == echoed + echoed_pair
        third = await client.prompt(sid, "again")

    assert replayed == ["before \ufffd after", "smile \U0001f600"]
    assert third.get("result", {}).get("stopReason") == "end_turn", third
