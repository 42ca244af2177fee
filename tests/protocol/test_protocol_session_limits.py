"""A bounded set of live sessions: past `max_live_sessions` the least recently used idle one
is closed (its log file with it), and opened again from the store when its id is used, with
no difference the client can see but the time it takes.

The model is the fake OpenAI server, so what the model is sent (the restored history) can
be read from its requests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient
from fake_llm import FakeLLM, fake_reply, message_text

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd"),
]

Connection = Callable[..., Any]
LIMIT = 3
MORE_SESSIONS = 30


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def config_file(tmp_path: Path, fake_llm: FakeLLM) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(
        f"max_live_sessions = {LIMIT}\n"
        f'[providers.openai]\ntype = "openai"\nbase_url = "{fake_llm.base_url}"\n'
        '[[providers.openai.models]]\nid = "fake-model"\n',
        encoding="utf-8",
    )
    return str(path)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def prompt_frame(client: FakeClient, session_id: str, text: str) -> tuple[int, dict[str, Any]]:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return client.next_request("session/prompt", params)


async def test_past_the_limit_sessions_let_go_close_their_files_and_come_back_with_history(
    connection: Connection, config_file: str, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        await client.initialize()
        first = await client.new_session(tmp_path)
        assert (await client.prompt(first, "remember the heron"))["result"]["stopReason"] == (
            "end_turn"
        )
        before = open_fds()
        for _ in range(MORE_SESSIONS):
            await client.new_session(tmp_path)
        after = open_fds()

        # The first session was let go long ago; using its id brings it back.
        await client.call("session/set_mode", {"sessionId": first, "modeId": "accept-edits"})
        reply = await client.prompt(first, "which bird?")
        mode_updates = [
            u for u in client.updates(first) if u["sessionUpdate"] == "current_mode_update"
        ]

    assert after - before <= LIMIT, f"{after - before} files opened by {MORE_SESSIONS} sessions"
    assert reply["result"] == {"stopReason": "end_turn"}
    assert [u["currentModeId"] for u in mode_updates] == ["accept-edits"]
    sent = [message_text(m) for m in fake_llm.requests[-1]["messages"][1:]]
    assert sent == ["remember the heron", fake_reply("remember the heron"), "which bird?"]


async def test_a_prompt_and_a_cancel_read_while_a_session_is_let_go_keep_their_meaning(
    connection: Connection, config_file: str, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        await client.initialize()
        first = await client.new_session(tmp_path)
        for _ in range(LIMIT + 1):
            await client.new_session(tmp_path)
        cancelled_id, cancelled = prompt_frame(client, first, "never sent to the model")
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": first}}
        await client.send_together(cancelled, cancel)
        cancelled_reply = await client.reply(cancelled_id)
        later = await client.prompt(first, "sent after the cancel")

    assert cancelled_reply["result"] == {"stopReason": "cancelled"}
    assert later["result"] == {"stopReason": "end_turn"}
    sent = [message_text(m) for r in fake_llm.requests for m in r["messages"][1:]]
    assert "never sent to the model" not in sent
    assert sent[-1] == "sent after the cancel"


async def test_a_session_with_a_prompt_running_is_never_let_go(
    connection: Connection, config_file: str, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        await client.initialize()
        busy = await client.new_session(tmp_path)
        running = await client.start_prompt(busy, "[[slow 0.05]] one two three four five six")
        await client.wait_for(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["sessionId"] == busy
                and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
        for _ in range(LIMIT + 2):
            await client.new_session(tmp_path)
        reply = await client.reply(running)
        streamed = "".join(
            u["content"]["text"]
            for u in client.updates(busy)
            if u["sessionUpdate"] == "agent_message_chunk"
        )

    assert reply["result"] == {"stopReason": "end_turn"}
    assert streamed == fake_reply("[[slow 0.05]] one two three four five six")
