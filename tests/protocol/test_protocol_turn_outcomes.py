"""A turn that failed or was cancelled: the next request still alternates user and assistant
(some vendors and chat templates refuse two user messages in a row), and a loaded session
says what happened to it instead of showing the prompt and nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_acp_client import FakeClient
from fake_llm import FakeLLM, message_text

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]
WRITE = 'Write it\n@tool write_file {"path": "a.txt", "content": "x"}'


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def openai_compatible(tmp_path: Path, base_url: str) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(
        f"""
[providers.fake]
type = "openai-compatible"
base_url = "{base_url}"
retry = {{ max_attempts = 1 }}
models = [{{ id = "fake-model" }}]
""",
        encoding="utf-8",
    )
    return str(path)


async def load_replay(client: FakeClient, session_id: str, cwd: Path) -> list[dict[str, Any]]:
    """The updates `session/load` sent for the session before its answer."""
    start = len(client.frames)
    reply = await client.request(
        "session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
    )
    assert "error" not in reply, reply
    end = client.frames.index(reply)
    return [
        f["params"]["update"]
        for f in client.frames[start:end]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
    ]


def shown(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(kind, text) of the message chunks, runs of one kind joined."""
    lines: list[tuple[str, str]] = []
    for update in updates:
        kind = update["sessionUpdate"]
        if kind not in ("user_message_chunk", "agent_message_chunk"):
            continue
        text = update["content"]["text"]
        if lines and lines[-1][0] == kind:
            lines[-1] = (kind, lines[-1][1] + text)
        else:
            lines.append((kind, text))
    return lines


async def test_after_a_failed_reply_the_next_request_alternates_and_a_load_says_it_failed(
    connection: Connection, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    config = openai_compatible(tmp_path, fake_llm.base_url)
    async with connection(config) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        failed = await client.prompt(session_id, "[[status 500]] first try")
        answered = await client.prompt(session_id, "second try")
    async with connection(config) as client:
        await client.initialize()
        replayed = shown(await load_replay(client, session_id, tmp_path))

    assert "error" in failed and answered["result"] == {"stopReason": "end_turn"}
    messages = [m for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert message_text(messages[1]).startswith("[No reply: the model's reply failed: ")
    assert "500" in message_text(messages[1])
    assert [kind for kind, _ in replayed] == [
        "user_message_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
    ]
    assert replayed[1][1].strip().startswith("[The model's reply failed: ")
    assert "500" in replayed[1][1]


async def test_a_load_marks_a_cancelled_turn_and_the_next_request_alternates(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        ended = anyio.Event()

        async def answer_when_ended(params: dict[str, Any]) -> dict[str, Any]:
            await ended.wait()  # a user who never clicks: the cancel ends the question
            return {"outcome": {"outcome": "cancelled"}}

        client.permission_answer = answer_when_ended
        asked = await client.start_prompt(session_id, WRITE)
        await client.wait_for(lambda f: f.get("method") == "session/request_permission")
        await client.notify("session/cancel", {"sessionId": session_id})
        cancelled = await client.reply(asked)
        ended.set()
        after = await client.prompt(session_id, "go on")
    async with connection() as client:
        await client.initialize()
        replayed = shown(await load_replay(client, session_id, tmp_path))

    assert cancelled["result"] == {"stopReason": "cancelled"}
    assert after["result"] == {"stopReason": "end_turn"}
    assert not (tmp_path / "a.txt").exists()
    assert replayed[0][0] == "user_message_chunk"
    assert replayed[1] == ("agent_message_chunk", "\n\n[Cancelled]\n\n")
    assert replayed[2] == ("user_message_chunk", "go on")
