"""A session's prompts run in the order their frames were read (ARCHITECTURE rule 10), even
when the earlier one has more to do before its turn, and a prompt that fails before its turn
(bad params, content it cannot read, a repeated idempotency key) never stalls the ones behind
it. The frames go in one write, so only their order orders them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient
from test_dialect import V2_INITIALIZE

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]


def prompt(client: FakeClient, session_id: str, text: Any, **extra: Any) -> tuple[int, Any]:
    content = [{"type": "text", "text": text}] if isinstance(text, str) else text
    params = {"sessionId": session_id, "prompt": content, **extra}
    return client.next_request("session/prompt", params)


def echoed(client: FakeClient, session_id: str) -> list[str]:
    """What the echo model answered, one entry per turn."""
    text = "".join(
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] in ("agent_message_chunk", "agent_message")
        and u.get("content", {}).get("type") == "text"
    )
    return [part.strip() for part in text.split("Echo: ") if part.strip()]


def update_of(frame: dict[str, Any]) -> dict[str, Any]:
    update: dict[str, Any] = frame.get("params", {}).get("update", {})
    return update


def states(client: FakeClient, session_id: str) -> list[str]:
    return [u["state"] for u in client.updates(session_id) if u["sessionUpdate"] == "state_update"]


def add_prompt_file(cwd: Path) -> None:
    """A prompt file that appears after `session/new`: the next prompt announces it as a
    command before its turn, which is the work an earlier prompt does that a later one
    read behind it does not."""
    commands = cwd / ".agents" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("Review the code.\n", encoding="utf-8")


async def test_a_sessions_first_prompt_is_not_overtaken_by_the_ones_read_after_it(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        add_prompt_file(tmp_path)
        requests = [prompt(client, session_id, f"prompt {n}") for n in range(1, 6)]
        await client.send_together(*(message for _, message in requests))
        replies = [await client.reply(request_id) for request_id, _ in requests]

    assert [r["result"] for r in replies] == [{"stopReason": "end_turn"}] * 5
    assert echoed(client, session_id) == [f"prompt {n}" for n in range(1, 6)]
    commands = client.index_of(
        lambda f: any(c["name"] == "review" for c in update_of(f).get("availableCommands", ()))
    )
    first_text = client.index_of(
        lambda f: update_of(f).get("sessionUpdate") == "agent_message_chunk"
    )
    assert commands < first_text, "the first prompt announced the new command before its turn"


async def test_prompts_that_fail_before_their_turn_do_not_stall_the_ones_behind_them(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        first_id, first = prompt(client, session_id, "first")
        bad_id, bad = prompt(client, session_id, "not a list of content blocks")
        bad["params"]["prompt"] = "not a list of content blocks"
        unreadable_id, unreadable = prompt(client, session_id, [{"type": "hologram"}])
        last_id, last = prompt(client, session_id, "last")
        await client.send_together(first, bad, unreadable, last)
        bad_reply = await client.reply(bad_id)
        unreadable_reply = await client.reply(unreadable_id)
        last_reply = await client.reply(last_id)
        first_reply = await client.reply(first_id)
        after = await client.prompt(session_id, "and the session goes on")

    assert bad_reply["error"]["code"] == -32602
    assert unreadable_reply["error"]["code"] == -32602
    assert first_reply["result"] == last_reply["result"] == {"stopReason": "end_turn"}
    assert after["result"] == {"stopReason": "end_turn"}
    said = echoed(client, session_id)
    assert said == ["first", "last", "and the session goes on"]


async def test_a_v2_prompt_repeating_a_key_does_not_stall_the_prompts_behind_it(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize(V2_INITIALIZE)
        session_id: str = (await client.call("session/new", {"cwd": str(tmp_path)}))["sessionId"]
        add_prompt_file(tmp_path)
        first_id, first = prompt(client, session_id, "first", idempotencyKey="k1")
        again_id, again = prompt(client, session_id, "first", idempotencyKey="k1")
        second_id, second = prompt(client, session_id, "second")
        await client.send_together(first, again, second)
        answers = [(await client.reply(i))["result"] for i in (first_id, again_id, second_id)]
        await client.wait_for(lambda f: states(client, session_id).count("idle") == 2)

    assert answers[0] == answers[1], "the repeat got the first answer"
    assert answers[2]["messageId"] != answers[0]["messageId"]
    assert echoed(client, session_id) == ["first", "second"]
    assert states(client, session_id) == ["running", "idle", "running", "idle"], (
        "the first ends before the next runs"
    )
