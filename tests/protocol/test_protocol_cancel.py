"""A cancel is never lost: it is recorded when its frame is read, not when a task runs.

Every test sends the prompt and the cancel in one write, so nothing orders them but the
order of the frames.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_acp_client import FakeClient

pytestmark = pytest.mark.anyio

Connection = Callable[[], Any]
CANCEL = "session/cancel"


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def cancel_frame(session_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": CANCEL, "params": {"sessionId": session_id}}


def streamed_text(client: FakeClient, session_id: str) -> str:
    return "".join(
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


async def test_a_cancel_in_the_same_write_as_its_prompt_ends_that_prompt_cancelled(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        prompt_id, prompt = client.next_request(
            "session/prompt", prompt_params(session_id, "never streamed")
        )
        await client.send_together(prompt, cancel_frame(session_id))
        reply = await client.reply(prompt_id)
        assert reply["result"] == {"stopReason": "cancelled"}
        assert "never streamed" not in streamed_text(client, session_id)
        # The session is still usable, and the next prompt is not cancelled.
        after = await client.prompt(session_id, "fresh start")
    assert after["result"] == {"stopReason": "end_turn"}
    assert streamed_text(client, session_id) == "Echo: fresh start"


async def test_a_prompt_queued_in_the_same_write_as_a_cancel_never_runs(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        running_id = await client.start_prompt(session_id, "@slow 0.2\none two three four")
        await client.wait_for(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
        queued_id, queued = client.next_request(
            "session/prompt", prompt_params(session_id, "queued words")
        )
        await client.send_together(queued, cancel_frame(session_id))
        running = await client.reply(running_id)
        queued_reply = await client.reply(queued_id)
    assert running["result"] == {"stopReason": "cancelled"}
    assert queued_reply["result"] == {"stopReason": "cancelled"}
    assert "queued" not in streamed_text(client, session_id)


async def test_a_prompt_sent_after_a_cancel_in_the_same_write_still_runs(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        first_id, first = client.next_request(
            "session/prompt", prompt_params(session_id, "cancelled words")
        )
        second_id, second = client.next_request(
            "session/prompt", prompt_params(session_id, "after the cancel")
        )
        await client.send_together(first, cancel_frame(session_id), second)
        first_reply = await client.reply(first_id)
        second_reply = await client.reply(second_id)
    assert first_reply["result"] == {"stopReason": "cancelled"}
    assert second_reply["result"] == {"stopReason": "end_turn"}
    assert streamed_text(client, session_id) == "Echo: after the cancel"


async def test_a_cancelled_turn_withdraws_its_open_permission_request(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        asked, withdrawn_seen = anyio.Event(), anyio.Event()

        async def answer_once_withdrawn(params: dict[str, Any]) -> dict[str, Any]:
            asked.set()
            await withdrawn_seen.wait()  # a user who never clicks: only the agent ends it
            return {"outcome": {"outcome": "cancelled"}}

        client.permission_answer = answer_once_withdrawn
        prompt_id = await client.start_prompt(
            session_id, '@tool shell {"command": "touch should-not-exist"}'
        )
        await asked.wait()
        await client.notify(CANCEL, {"sessionId": session_id})
        reply = await client.reply(prompt_id)
        withdrawn = await client.wait_for(lambda f: f.get("method") == "$/cancel_request")
        withdrawn_seen.set()
    [permission_request] = [
        r for r in client.agent_requests if r["method"] == "session/request_permission"
    ]
    assert reply["result"] == {"stopReason": "cancelled"}
    assert withdrawn["params"] == {"requestId": permission_request["id"]}
    assert not (tmp_path / "should-not-exist").exists()
