"""ACP v2's per-piece cancel, background work and questions that block a turn, on an
in-process agent driven by `FakeClient`: `tool_call/cancel` and `terminal/cancel` stop one
running call or command and the turn goes on; a background job is listed in every
`state_update` until its terminal reports its exit; an elicitation puts the turn in
`requires_action` and back. Every update is checked against the v2 schema."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fake_acp_client import ZED_INITIALIZE, FakeClient
from test_dialect import _schema as v2_schema
from test_dialect import assert_v2
from test_v2_prompts import v2_session

from acp_agent.messages import BackgroundChanged, ToolCallUpdated
from acp_agent.protocol.updates import session_update
from acp_agent.protocol.v2_states import SessionStates
from acp_agent.rpc.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]
METHOD_NOT_FOUND = -32601
LONG_COMMAND = "echo started; sleep 30; echo never"


def _shell(command: str, **extra: Any) -> str:
    return f"@tool shell {json.dumps({'command': command, **extra})}"


def _update_of(frame: dict[str, Any], session_id: str) -> dict[str, Any] | None:
    if frame.get("method") != "session/update" or frame["params"]["sessionId"] != session_id:
        return None
    update: dict[str, Any] = frame["params"]["update"]
    return update


def _output(session_id: str, text: str) -> Callable[[dict[str, Any]], bool]:
    """A `terminal_output_chunk` of the session with `text` in it."""

    def matches(frame: dict[str, Any]) -> bool:
        update = _update_of(frame, session_id)
        if update is None or update["sessionUpdate"] != "terminal_output_chunk":
            return False
        return text in base64.b64decode(update["data"]).decode()

    return matches


def _state(session_id: str, state: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    def matches(frame: dict[str, Any]) -> bool:
        update = _update_of(frame, session_id)
        return (
            update is not None
            and update["sessionUpdate"] == "state_update"
            and update["state"] == state
            and all(update.get(key) == value for key, value in fields.items())
        )

    return matches


def _exited(session_id: str, terminal_id: str) -> Callable[[dict[str, Any]], bool]:
    def matches(frame: dict[str, Any]) -> bool:
        update = _update_of(frame, session_id)
        return (
            update is not None
            and update["sessionUpdate"] == "terminal_update"
            and update["terminalId"] == terminal_id
            and "exitStatus" in update
        )

    return matches


def _kinds(client: FakeClient, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(session_id) if u["sessionUpdate"] == kind]


def _said(client: FakeClient, session_id: str) -> str:
    """Everything the agent said in the session (the echo model reports tool results)."""
    said = []
    for update in client.updates(session_id):
        if update["sessionUpdate"] == "agent_message_chunk":
            said.append(update["content"].get("text", ""))
        elif update["sessionUpdate"] == "agent_message":
            said += [block.get("text", "") for block in update["content"]]
    return "".join(said)


@cache
def _update_schema() -> jsonschema.Draft202012Validator:
    """The v2 (unstable) schema's `SessionUpdate`, compiled once: checking every frame of a
    test against it anew each time costs seconds."""
    defs = v2_schema("schema.unstable.json")["$defs"]
    return jsonschema.Draft202012Validator({"$ref": "#/$defs/SessionUpdate", "$defs": defs})


def _assert_all_v2(client: FakeClient) -> None:
    for frame in client.frames:
        if frame.get("method") == "session/update":
            _update_schema().validate(frame["params"]["update"])


async def _running_command(client: FakeClient, session_id: str) -> tuple[str, str]:
    """Start LONG_COMMAND in a turn; once its first output is shown: (call id, terminal id)."""
    await client.start_request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": _shell(LONG_COMMAND)}]},
    )
    chunk = _update_of(await client.wait_for(_output(session_id, "started")), session_id)
    assert chunk is not None
    [opened] = [
        u
        for u in _kinds(client, session_id, "terminal_update")
        if u["terminalId"] == chunk["terminalId"]
    ]
    [call] = [u for u in _kinds(client, session_id, "tool_call_update") if u.get("name") == "shell"]
    return call["toolCallId"], opened["terminalId"]


# --- tool_call/cancel ----------------------------------------------------------------------


async def test_cancelling_a_running_tool_call_ends_that_call_and_the_turn_goes_on(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        call_id, terminal_id = await _running_command(client, session_id)
        answer = await client.request(
            "tool_call/cancel", {"sessionId": session_id, "toolCallId": call_id}
        )
        await client.wait_for(_state(session_id, "idle"))
        late = await client.request(
            "tool_call/cancel", {"sessionId": session_id, "toolCallId": call_id}
        )
        # The session goes on as before.
        await client.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        )
        await client.wait_for(lambda f: len(_kinds(client, session_id, "state_update")) >= 6)

    assert answer["result"] == {}
    assert_v2(answer["result"], "CancelToolCallResponse")
    calls = [
        u for u in _kinds(client, session_id, "tool_call_update") if u["toolCallId"] == call_id
    ]
    running = next(u for u in calls if u.get("status") == "in_progress")
    assert running["capabilities"] == {"cancel": {}}  # advertised while it runs
    final = calls[-1]
    assert final["status"] == "cancelled"
    assert final["capabilities"] is None  # withdrawn once final
    # Its command ended with it: the terminal shows it exited.
    assert any(_exited(session_id, terminal_id)(frame) for frame in client.frames)
    # The model heard why, and the turn ended normally, not cancelled.
    assert "The user cancelled this tool call while it ran" in _said(client, session_id)
    idle = next(u for u in _kinds(client, session_id, "state_update") if u["state"] == "idle")
    assert idle["stopReason"] == "end_turn"
    # Cancelling again, after the call ended: refused, naming the field; nothing else changes.
    assert late["error"]["code"] == INVALID_PARAMS
    assert "toolCallId" in late["error"]["message"]
    assert late["error"]["data"]["field"] == "toolCallId"
    _assert_all_v2(client)


# --- terminal/cancel -----------------------------------------------------------------------


async def test_cancelling_a_commands_terminal_stops_the_command_and_its_call_reports_it(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        call_id, terminal_id = await _running_command(client, session_id)
        answer = await client.request(
            "terminal/cancel", {"sessionId": session_id, "terminalId": terminal_id}
        )
        await client.wait_for(_state(session_id, "idle"))
        late = await client.request(
            "terminal/cancel", {"sessionId": session_id, "terminalId": terminal_id}
        )

    assert answer["result"] == {}
    assert_v2(answer["result"], "CancelTerminalResponse")
    terminals = [
        u for u in _kinds(client, session_id, "terminal_update") if u["terminalId"] == terminal_id
    ]
    opened, exited = terminals
    assert opened["command"] == LONG_COMMAND
    assert opened["cwd"] == str(tmp_path)
    assert opened["capabilities"] == {"cancel": {}}
    assert exited["exitStatus"] == {"signal": "SIGTERM"}
    assert exited["capabilities"] is None
    final = [
        u for u in _kinds(client, session_id, "tool_call_update") if u["toolCallId"] == call_id
    ][-1]
    assert final["status"] == "failed"  # ended by a signal; the call itself was not cancelled
    assert {"type": "terminal", "terminalId": terminal_id} in final["content"]
    said = _said(client, session_id)
    assert "the user stopped this command: ended by signal SIGTERM" in said
    assert "never" not in said
    idle = next(u for u in _kinds(client, session_id, "state_update") if u["state"] == "idle")
    assert idle["stopReason"] == "end_turn"
    assert late["error"]["code"] == INVALID_PARAMS
    assert late["error"]["data"]["field"] == "terminalId"
    _assert_all_v2(client)


async def test_ids_of_another_session_or_of_nothing_are_refused(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        other: str = (await client.call("session/new", {"cwd": str(tmp_path)}))["sessionId"]
        call_id, terminal_id = await _running_command(client, session_id)
        theirs = await client.request(
            "terminal/cancel", {"sessionId": other, "terminalId": terminal_id}
        )
        their_call = await client.request(
            "tool_call/cancel", {"sessionId": other, "toolCallId": call_id}
        )
        unknown = await client.request(
            "tool_call/cancel", {"sessionId": session_id, "toolCallId": "call_nope"}
        )
        no_session = await client.request(
            "terminal/cancel", {"sessionId": "sess_nope", "terminalId": terminal_id}
        )
        missing = await client.request("terminal/cancel", {"sessionId": session_id})
        still_running = not any(_exited(session_id, terminal_id)(f) for f in client.frames)
        await client.request("tool_call/cancel", {"sessionId": session_id, "toolCallId": call_id})
        await client.wait_for(_state(session_id, "idle"))

    assert theirs["error"]["code"] == INVALID_PARAMS
    assert theirs["error"]["data"]["field"] == "terminalId"
    assert their_call["error"]["data"]["field"] == "toolCallId"
    assert unknown["error"]["code"] == INVALID_PARAMS
    assert no_session["error"]["code"] == RESOURCE_NOT_FOUND
    assert missing["error"]["code"] == INVALID_PARAMS
    assert "terminalId" in missing["error"]["message"]
    assert still_running  # none of those stopped the command
    _assert_all_v2(client)


async def test_a_v1_connection_has_no_per_piece_cancel(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize(ZED_INITIALIZE)
        session_id = await client.new_session(tmp_path)
        refused = await client.request(
            "tool_call/cancel", {"sessionId": session_id, "toolCallId": "call_1"}
        )

    assert refused["error"]["code"] == METHOD_NOT_FOUND


# --- background work -----------------------------------------------------------------------


async def test_a_background_job_is_listed_in_every_state_until_its_terminal_exits(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await v2_session(client, tmp_path)
        await client.request(
            "session/prompt",
            {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": _shell("echo up; sleep 30", background=True)}],
            },
        )
        await client.wait_for(_state(session_id, "idle", stopReason="end_turn"))
        await client.wait_for(_output(session_id, "up"))
        [job] = [u for u in _kinds(client, session_id, "terminal_update") if "cwd" in u]
        terminal_id = job["terminalId"]
        status = await client.request("session/status", {"sessionId": session_id})
        answer = await client.request(
            "terminal/cancel", {"sessionId": session_id, "terminalId": terminal_id}
        )
        await client.wait_for(_state(session_id, "idle", background=[]))
        after = await client.request("session/status", {"sessionId": session_id})

    assert answer["result"] == {}
    listed = [{"type": "terminal", "terminalId": terminal_id}]
    # `session/status` tells the last state reported, as a snapshot: no stop reason.
    assert status["result"] == {"status": "open", "state": {"state": "idle", "background": listed}}
    assert after["result"] == {"status": "open", "state": {"state": "idle", "background": []}}
    states = _kinds(client, session_id, "state_update")
    assert all("background" in state for state in states)  # reported: on every one
    assert [(s["state"], s.get("stopReason"), s["background"]) for s in states] == [
        ("running", None, []),
        ("requires_action", None, []),  # the permission to run the command
        ("running", None, []),
        ("running", None, listed),  # the job started
        ("idle", "end_turn", listed),  # the turn ended; the job runs on
        ("idle", None, []),  # the job ended: no new completion
    ]
    # Announced before the first list that names it; its exit before the list without it.
    updates = client.updates(session_id)
    opened_at = updates.index(job)
    first_listed = next(i for i, u in enumerate(updates) if u.get("background") == listed)
    exit_at = next(
        i for i, u in enumerate(updates) if u.get("terminalId") == terminal_id and "exitStatus" in u
    )
    assert opened_at < first_listed < exit_at < updates.index(states[-1])
    assert updates[exit_at]["exitStatus"] == {"signal": "SIGTERM"}
    assert job["command"] == "echo up; sleep 30"
    _assert_all_v2(client)


# --- questions that block the turn ---------------------------------------------------------


async def test_an_elicitation_puts_the_turn_in_requires_action_then_running(
    connection: Connection, tmp_path: Path
) -> None:
    question = {"question": "Which database?", "choices": ["Postgres", "SQLite"]}
    statuses: list[dict[str, Any]] = []
    async with connection() as client:

        async def answer(request: dict[str, Any]) -> None:
            # Asked while the turn is reported blocked on the user.
            assert _states(client, session_id)[-1]["state"] == "requires_action"
            statuses.append(await client.request("session/status", {"sessionId": session_id}))
            result = {"action": "accept", "content": {"choice": "SQLite"}}
            await client.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

        client.answer_overrides["elicitation/create"] = answer
        client.permission_answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        session_id = await v2_session(client, tmp_path)
        await client.request(
            "session/prompt",
            {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": f"@tool ask_user {json.dumps(question)}"}],
            },
        )
        await client.wait_for(_state(session_id, "idle"))

    assert client.agent_requests_for("elicitation/create")
    assert [s["state"] for s in _states(client, session_id)] == [
        "running",
        "requires_action",
        "running",
        "idle",
    ]
    assert "SQLite" in _said(client, session_id)
    # Asked meanwhile, `session/status` says the turn waits for the user.
    assert [status["result"] for status in statuses] == [
        {"status": "open", "state": {"state": "requires_action", "background": []}}
    ]
    _assert_all_v2(client)


def _states(client: FakeClient, session_id: str) -> list[dict[str, Any]]:
    return _kinds(client, session_id, "state_update")


def test_questions_together_or_while_idle_report_one_requires_action_or_none() -> None:
    states = SessionStates()
    states.foreground("s1", "running")

    first, second = states.asking("s1"), states.asking("s1")
    one_answered, both_answered = states.answered("s1"), states.answered("s1")
    states.foreground("s1", "idle", "end_turn")
    while_idle = states.asking("s1"), states.answered("s1")

    assert first is not None and first["state"] == "requires_action"
    assert (second, one_answered) == (None, None)  # still blocked on the other question
    assert both_answered is not None and both_answered["state"] == "running"
    assert while_idle == (None, None)  # a question between turns blocks no turn
    for update in (first, both_answered):
        _update_schema().validate(update)


def test_v1_shows_a_call_cancelled_alone_as_failed_and_no_cancel_control() -> None:
    cancelled = session_update(ToolCallUpdated("call_1", status="cancelled"))
    running = session_update(ToolCallUpdated("call_1", status="in_progress", cancellable=True))

    assert cancelled == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "failed",
    }
    assert running == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "in_progress",
    }
    assert session_update(BackgroundChanged(("local-job-1",))) is None  # v1 lists none
