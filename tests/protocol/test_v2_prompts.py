"""ACP v2's prompt lifecycle on an in-process agent: `session/prompt` answers `{messageId}`
at insertion, `user_message` and `state_update` report the rest; every frame is checked
against the v2 schema (`schema_support.assert_v2`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient
from schema_support import assert_v2
from test_dialect import V2_INITIALIZE
from test_protocol_error_details import openai_compatible, write_config

from acp_agent.rpc.errors import INTERNAL_ERROR, RESOURCE_NOT_FOUND

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]


def _prompt(session_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}], **extra}


def _is_idle(frame: dict[str, Any]) -> bool:
    update = frame.get("params", {}).get("update", {})
    return update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"


def _states(client: FakeClient, session_id: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(session_id) if u["sessionUpdate"] == "state_update"]


def _assert_all_v2(client: FakeClient, session_id: str) -> None:
    for update in client.updates(session_id):
        assert_v2(update, "SessionUpdate", stable=False)


async def v2_session(client: FakeClient, cwd: Path) -> str:
    """A v2 connection's first session (shared with test_v2_cancel)."""
    await client.initialize(V2_INITIALIZE)
    session_id: str = (await client.call("session/new", {"cwd": str(cwd)}))["sessionId"]
    return session_id


async def test_a_v2_prompt_answers_its_message_id_at_insertion_then_goes_idle(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        request_id = await client.start_request("session/prompt", _prompt(session_id, "hello"))
        answer = (await client.reply(request_id))["result"]
        await client.wait_for(_is_idle)

    assert_v2(answer, "PromptResponse")
    assert set(answer) == {"messageId"}
    _assert_all_v2(client, session_id)
    updates = client.updates(session_id)
    echoed = next(u for u in updates if u["sessionUpdate"] == "user_message")
    assert echoed == {
        "sessionUpdate": "user_message",
        "messageId": answer["messageId"],
        "content": [{"type": "text", "text": "hello"}],
    }
    assert [(s["state"], s.get("stopReason")) for s in _states(client, session_id)] == [
        ("running", None),
        ("idle", "end_turn"),
    ]
    # Answered before the turn ended, and the reply came after the insertion was reported.
    answered = client.index_of(lambda f: f.get("id") == request_id and "result" in f)
    assert answered < client.index_of(_is_idle)
    assert "stopReason" not in answer


async def test_a_v2_prompt_that_fails_after_insertion_goes_idle_with_the_error(
    connection: Connection, tmp_path: Path
) -> None:
    # A provider on a closed port: the turn fails at its first request, after insertion.
    config = write_config(tmp_path, openai_compatible("http://127.0.0.1:1/v1"))
    async with connection(config) as client:
        session_id = await v2_session(client, tmp_path)
        answer = await client.call("session/prompt", _prompt(session_id, "hi"))
        await client.wait_for(_is_idle)

    assert_v2(answer, "PromptResponse")
    _assert_all_v2(client, session_id)
    idle = _states(client, session_id)[-1]
    assert idle["stopReason"] == "error"
    assert idle["error"]["code"] == INTERNAL_ERROR and "127.0.0.1:1" in idle["error"]["message"]


async def test_a_v2_prompt_for_an_unknown_session_fails_before_insertion(
    connection: Connection,
) -> None:
    async with connection() as client:
        await client.initialize(V2_INITIALIZE)
        error = await client.error("session/prompt", _prompt("nobody", "hi"))

    assert error["code"] == RESOURCE_NOT_FOUND
    assert not [u for u in client.updates() if u["sessionUpdate"] == "state_update"]


async def test_a_v2_slash_command_answers_a_fresh_id_when_it_ends(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        answer = await client.call("session/prompt", _prompt(session_id, "/model"))
        await client.wait_for(_is_idle)

    assert_v2(answer, "PromptResponse")
    _assert_all_v2(client, session_id)
    assert not [u for u in client.updates(session_id) if u["sessionUpdate"] == "user_message"]
    assert _states(client, session_id)[-1]["state"] == "idle"


async def test_a_v2_repeat_with_the_same_idempotency_key_inserts_once(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        params = _prompt(session_id, "once", idempotencyKey="k-1")
        first = await client.start_request("session/prompt", params)
        again = await client.start_request("session/prompt", params)
        answers = [(await client.reply(i))["result"] for i in (first, again)]
        await client.wait_for(_is_idle)
        other = await client.call(
            "session/prompt", _prompt(session_id, "twice", idempotencyKey="k-2")
        )

    assert answers[0] == answers[1]
    assert other != answers[0]
    echoed = [u for u in client.updates(session_id) if u["sessionUpdate"] == "user_message"]
    assert [u["messageId"] for u in echoed] == [answers[0]["messageId"], other["messageId"]]


async def _resume(client: FakeClient, session_id: str, cwd: Path, **extra: Any) -> dict[str, Any]:
    await client.call("session/close", {"sessionId": session_id})
    client.frames.clear()  # what follows is the resume's alone
    return await client.request(
        "session/resume", {"sessionId": session_id, "cwd": str(cwd), **extra}
    )


async def test_a_v2_resume_from_the_start_replays_then_marks_the_end_before_answering(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        sent = await client.call("session/prompt", _prompt(session_id, "remember me"))
        await client.wait_for(_is_idle)
        reply = await _resume(client, session_id, tmp_path, replayFrom={"type": "start"})

    assert_v2(reply["result"], "ResumeSessionResponse")
    _assert_all_v2(client, session_id)
    kinds = [u["sessionUpdate"] for u in client.updates(session_id)]
    marker = kinds.index("replay_complete")
    assert kinds.count("replay_complete") == 1
    # The history before the marker: the user's message (its id kept) and the reply.
    replayed = client.updates(session_id)[:marker]
    echoed = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in echoed] == ["remember me"]
    assert echoed[0]["messageId"] == sent["messageId"]
    assert "agent_message_chunk" in kinds[:marker] or "agent_message" in kinds[:marker]
    # Then the current state, then the answer; never a mode update.
    assert kinds[marker + 1] == "state_update"
    answered = client.index_of(lambda f: "result" in f)
    last_update = max(
        i
        for i, f in enumerate(client.frames)
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "state_update"
    )
    assert last_update < answered
    assert "current_mode_update" not in kinds


def _shown_messages(updates: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """What a client holds per message after applying `updates` as the v2 schema says: a
    whole-message update replaces the content, a chunk appends to it."""
    shown: dict[str, list[dict[str, Any]]] = {}
    for update in updates:
        kind = update["sessionUpdate"]
        if kind in ("user_message", "agent_message", "agent_thought"):
            shown[f"{kind}/{update['messageId']}"] = list(update.get("content") or [])
        elif kind.endswith("_chunk") and "messageId" in update:
            key = f"{kind.removesuffix('_chunk')}/{update['messageId']}"
            shown.setdefault(key, []).append(update["content"])
    return shown


async def test_a_v2_replay_to_a_client_that_saw_the_turn_shows_each_message_once(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        sent = await client.call("session/prompt", _prompt(session_id, "remember me"))
        await client.wait_for(_is_idle)
        live = client.updates(session_id)
        await _resume(client, session_id, tmp_path, replayFrom={"type": "start"})
        replayed = client.updates(session_id)

    _assert_all_v2(client, session_id)
    shown = _shown_messages(live + replayed)
    assert shown[f"user_message/{sent['messageId']}"] == [{"type": "text", "text": "remember me"}]
    [reply] = [content for key, content in shown.items() if key.startswith("agent_message/")]
    assert "".join(block["text"] for block in reply) == "Echo: remember me"
    # The reset comes right before the message's first replayed chunk, once per message.
    kinds = [u["sessionUpdate"] for u in replayed]
    first_chunk = kinds.index("user_message_chunk")
    assert replayed[first_chunk - 1] == {
        "sessionUpdate": "user_message",
        "messageId": sent["messageId"],
        "content": [],
    }
    assert kinds.count("user_message") == 1


async def test_a_v2_resume_without_replay_from_sends_its_state_and_no_marker(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        await client.call("session/prompt", _prompt(session_id, "remember me"))
        await client.wait_for(_is_idle)
        reply = await _resume(client, session_id, tmp_path)
        bad = await _resume(client, session_id, tmp_path, replayFrom={"type": "somewhere"})

    assert_v2(reply["result"], "ResumeSessionResponse")
    kinds = [u["sessionUpdate"] for u in client.updates(session_id)]
    assert "replay_complete" not in kinds and "user_message" not in kinds
    assert bad["error"]["code"] == -32602


async def test_a_v2_permission_request_is_v2_shaped_and_the_turn_requires_action_meanwhile(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        write = '@tool write_file {"path": "notes.txt", "content": "hi"}'  # the echo model's
        await client.call("session/prompt", _prompt(session_id, write))
        await client.wait_for(_is_idle)
        [asked] = client.agent_requests_for("session/request_permission")

    assert_v2(asked, "RequestPermissionRequest")
    assert asked["title"] and asked["subject"]["type"] == "tool_call"
    assert asked["subject"]["toolCall"]["toolCallId"]
    assert (tmp_path / "notes.txt").read_text() == "hi"  # allowed once, then written
    _assert_all_v2(client, session_id)
    states = [s["state"] for s in _states(client, session_id)]
    assert states == ["running", "requires_action", "running", "idle"]
    asked_at = client.index_of(lambda f: f.get("method") == "session/request_permission")
    required = client.index_of(
        lambda f: f.get("params", {}).get("update", {}).get("state") == "requires_action"
    )
    assert required < asked_at
