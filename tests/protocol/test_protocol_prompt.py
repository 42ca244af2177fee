"""Prompt turns over the wire with the offline echo provider."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import (
    PromptResponse,
    ReadTextFileRequest,
    RequestPermissionRequest,
    SessionNotification,
)
from fake_acp_client import NO_FS_INITIALIZE, FakeClient, selected

pytestmark = pytest.mark.anyio

Connection = Callable[[], Any]
SLOW_WORDS = "one two three four five six seven eight nine ten"


def prompt_params(session_id: str, text: str = "hi") -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def chunk_text(client: FakeClient, session_id: str) -> str:
    return "".join(
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


def tool_updates(client: FakeClient, session_id: str) -> list[dict[str, Any]]:
    return [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]


def is_reply(request_id: int) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f.get("id") == request_id and "method" not in f


def is_chunk(session_id: str, containing: str = "") -> Callable[[dict[str, Any]], bool]:
    def matches(frame: dict[str, Any]) -> bool:
        if frame.get("method") != "session/update":
            return False
        params = frame["params"]
        update = params["update"]
        return (
            params["sessionId"] == session_id
            and update["sessionUpdate"] == "agent_message_chunk"
            and containing in update["content"]["text"]
        )

    return matches


def assert_updates_match_the_schema(client: FakeClient) -> None:
    for frame in client.frames:
        if frame.get("method") == "session/update":
            SessionNotification.model_validate(frame["params"])


# --- streaming -------------------------------------------------------------------------


async def test_a_prompt_streams_message_chunks_before_answering_end_turn(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        request_id = await client.start_prompt(session_id, "hello there world")
        reply = await client.reply(request_id)
    assert reply["result"] == {"stopReason": "end_turn"}
    PromptResponse.model_validate(reply["result"])
    chunks = [i for i, f in enumerate(client.frames) if is_chunk(session_id)(f)]
    assert chunks
    assert max(chunks) < client.index_of(is_reply(request_id))
    assert chunk_text(client, session_id) == "Echo: hello there world"
    assert_updates_match_the_schema(client)


async def test_every_frame_of_a_prompt_turn_is_valid_json_rpc(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await client.prompt(session_id, "a b c")
    for frame in client.frames:
        assert frame["jsonrpc"] == "2.0"
        assert ("method" in frame) != ("result" in frame or "error" in frame)


@pytest.mark.parametrize("reason", ["max_tokens", "refusal"])
async def test_a_scripted_stop_is_the_prompts_stop_reason(
    connection: Connection, tmp_path: Path, reason: str
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        reply = await client.prompt(session_id, f"@stop {reason}\nsome words")
    assert reply["result"] == {"stopReason": reason}


# --- tool calls ------------------------------------------------------------------------


async def test_a_scripted_tool_call_reads_through_the_client_and_completes_with_locations(
    connection: Connection, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("first line\nsecond line\n")
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        reply = await client.prompt(session_id, '@tool read_file {"path": "a.txt"}')
    assert reply["result"] == {"stopReason": "end_turn"}
    assert_updates_match_the_schema(client)

    updates = tool_updates(client, session_id)
    start = updates[0]
    assert start["sessionUpdate"] == "tool_call"
    assert start["kind"] == "read"
    call_id = start["toolCallId"]
    assert all(u["toolCallId"] == call_id for u in updates)
    last = updates[-1]
    assert last["sessionUpdate"] == "tool_call_update"
    assert last["status"] == "completed"
    assert last["locations"][0]["path"] == str(tmp_path / "a.txt")

    [read] = client.agent_requests_for("fs/read_text_file")
    ReadTextFileRequest.model_validate(read)
    assert read["sessionId"] == session_id
    assert read["path"] == str(tmp_path / "a.txt")
    assert read["line"] >= 1
    assert read["limit"] >= 1
    assert "second line" in chunk_text(client, session_id)


async def test_a_client_without_fs_capability_gets_no_fs_calls_and_the_tool_reads_locally(
    connection: Connection, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("read from the local disk\n")
    async with connection() as client:
        await client.initialize(NO_FS_INITIALIZE)
        session_id = await client.new_session(tmp_path)
        reply = await client.prompt(session_id, '@tool read_file {"path": "a.txt"}')
    assert reply["result"] == {"stopReason": "end_turn"}
    assert not [r for r in client.agent_requests if r["method"].startswith("fs/")]
    assert tool_updates(client, session_id)[-1]["status"] == "completed"
    assert "read from the local disk" in chunk_text(client, session_id)


async def test_a_read_outside_the_cwd_asks_permission_and_reject_once_fails_the_tool_call(
    connection: Connection, tmp_path: Path
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("do not read\n")
    async with connection() as client:
        client.permission_answer = selected("reject_once")
        await client.initialize()
        session_id = await client.new_session(project)
        arguments = json.dumps({"path": str(outside / "secret.txt")})
        reply = await client.prompt(session_id, f"@tool read_file {arguments}")
    assert reply["result"] == {"stopReason": "end_turn"}
    [question] = client.agent_requests_for("session/request_permission")
    RequestPermissionRequest.model_validate(question)
    assert question["sessionId"] == session_id
    updates = tool_updates(client, session_id)
    assert question["toolCall"]["toolCallId"] == updates[0]["toolCallId"]
    assert {option["kind"] for option in question["options"]} >= {"allow_once", "reject_once"}
    assert updates[-1]["status"] == "failed"
    assert not any(u.get("status") == "completed" for u in updates)
    assert client.agent_requests_for("fs/read_text_file") == []
    assert "do not read" not in chunk_text(client, session_id)
    assert_updates_match_the_schema(client)


async def test_a_read_outside_the_cwd_allowed_once_completes(
    connection: Connection, tmp_path: Path
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "notes.txt").write_text("allowed content\n")
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(project)
        arguments = json.dumps({"path": str(outside / "notes.txt")})
        reply = await client.prompt(session_id, f"@tool read_file {arguments}")
    assert reply["result"] == {"stopReason": "end_turn"}
    assert len(client.agent_requests_for("session/request_permission")) == 1
    assert tool_updates(client, session_id)[-1]["status"] == "completed"
    assert "allowed content" in chunk_text(client, session_id)


async def test_a_read_inside_the_cwd_asks_no_permission(
    connection: Connection, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await client.prompt(session_id, '@tool read_file {"path": "a.txt"}')
    assert client.agent_requests_for("session/request_permission") == []


async def test_session_cancel_while_permission_is_pending_returns_cancelled_without_the_answer(
    connection: Connection, tmp_path: Path
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "b.txt").write_text("b\n")
    never = anyio.Event()

    async def wait_forever(params: dict[str, Any]) -> dict[str, Any]:
        await never.wait()
        return selected("allow_once")

    async with connection() as client:
        client.permission_answer = wait_forever
        await client.initialize()
        session_id = await client.new_session(project)
        arguments = json.dumps({"path": str(outside / "b.txt")})
        request_id = await client.start_prompt(session_id, f"@tool read_file {arguments}")
        await client.wait_for(lambda f: f.get("method") == "session/request_permission")
        await client.notify("session/cancel", {"sessionId": session_id})
        # The question is never answered: the reply cannot have waited for it.
        reply = await client.reply(request_id)
        assert reply["result"] == {"stopReason": "cancelled"}
        assert (await client.prompt(session_id, "after"))["result"]["stopReason"] == "end_turn"
        never.set()
    assert client.agent_requests_for("fs/read_text_file") == []


async def test_a_cancelled_permission_outcome_still_answers_the_prompt(
    connection: Connection, tmp_path: Path
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "b.txt").write_text("b\n")
    async with connection() as client:
        client.permission_answer = {"outcome": {"outcome": "cancelled"}}
        await client.initialize()
        session_id = await client.new_session(project)
        arguments = json.dumps({"path": str(outside / "b.txt")})
        request_id = await client.start_prompt(session_id, f"@tool read_file {arguments}")
        reply = await client.wait_for(is_reply(request_id), within=1)
        assert reply["result"] == {"stopReason": "cancelled"}
        assert tool_updates(client, session_id)[-1]["status"] == "failed"
        assert (await client.prompt(session_id, "after"))["result"]["stopReason"] == "end_turn"


# --- cancellation and concurrency ------------------------------------------------------


async def test_session_cancel_during_a_slow_reply_answers_cancelled_and_streams_nothing_more(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        request_id = await client.start_prompt(session_id, f"@slow 0.5\n{SLOW_WORDS}")
        await client.wait_for(is_chunk(session_id))
        await client.notify("session/cancel", {"sessionId": session_id})
        reply = await client.reply(request_id)
        assert reply["result"] == {"stopReason": "cancelled"}
        assert "ten" not in chunk_text(client, session_id), "the reply stopped mid-stream"

        # A slow next turn: a chunk the cancelled turn still sent would land among its own.
        again = await client.prompt(session_id, "@slow 0.3\nonce more")
        assert again["result"] == {"stopReason": "end_turn"}
        cancelled_reply = client.index_of(is_reply(request_id))
        later = [
            f["params"]["update"]["content"]["text"]
            for f in client.frames[cancelled_reply:]
            if is_chunk(session_id)(f)
        ]
        assert "".join(later) == "Echo: once more"


async def test_two_sessions_run_prompts_concurrently(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        first = await client.new_session(tmp_path)
        second = await client.new_session(tmp_path)
        assert first != second
        first_id = await client.start_prompt(first, f"@slow 1\n{SLOW_WORDS}")
        await client.wait_for(is_chunk(first))
        second_reply = await client.prompt(second, "uno dos tres cuatro cinco")
        # The second session's whole turn ran while the first one was still streaming.
        assert not any(is_reply(first_id)(f) for f in client.frames)
        await client.notify("session/cancel", {"sessionId": first})
        first_reply = await client.reply(first_id)
    assert second_reply["result"] == {"stopReason": "end_turn"}
    assert first_reply["result"] == {"stopReason": "cancelled"}
    assert chunk_text(client, second) == "Echo: uno dos tres cuatro cinco"
    assert "ten" not in chunk_text(client, first), "the first turn was still streaming"


async def test_a_second_prompt_on_a_busy_session_is_queued_and_runs_after_the_first(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        first_id = await client.start_prompt(session_id, "@slow 0.05\nfirst prompt words")
        await client.wait_for(is_chunk(session_id))
        second_id = await client.start_prompt(session_id, "second")
        first_reply = await client.reply(first_id)
        second_reply = await client.reply(second_id)
    assert first_reply["result"] == second_reply["result"] == {"stopReason": "end_turn"}
    assert client.index_of(is_chunk(session_id, "second")) > client.index_of(is_reply(first_id))
    assert chunk_text(client, session_id) == "Echo: first prompt wordsEcho: second"


async def test_one_session_cancel_cancels_the_running_and_the_queued_prompt(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        first_id = await client.start_prompt(session_id, f"@slow 0.2\n{SLOW_WORDS}")
        await client.wait_for(is_chunk(session_id))
        second_id = await client.start_prompt(session_id, "queued words")
        third_id = await client.start_prompt(session_id, "more queued words")
        # Read after both prompts, the cancel finds them queued behind the first.
        await client.notify("session/cancel", {"sessionId": session_id})
        replies = [await client.reply(i) for i in (first_id, second_id, third_id)]
        assert [r["result"] for r in replies] == [{"stopReason": "cancelled"}] * 3
        assert "queued" not in chunk_text(client, session_id)
        after = await client.prompt(session_id, "fresh")
        assert after["result"] == {"stopReason": "end_turn"}


async def test_cancelling_one_session_leaves_another_running(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        first = await client.new_session(tmp_path)
        second = await client.new_session(tmp_path)
        first_id = await client.start_prompt(first, f"@slow 0.1\n{SLOW_WORDS}")
        second_id = await client.start_prompt(second, "@slow 0.02\nkeep going please")
        await client.wait_for(is_chunk(first))
        await client.notify("session/cancel", {"sessionId": first})
        assert (await client.reply(first_id))["result"] == {"stopReason": "cancelled"}
        assert (await client.reply(second_id))["result"] == {"stopReason": "end_turn"}
        assert chunk_text(client, second) == "Echo: keep going please"


# --- client failures and other content -------------------------------------------------


async def test_an_error_from_the_clients_fs_read_fails_the_tool_call_not_the_prompt(
    connection: Connection, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)

        async def refuse(request: dict[str, Any]) -> None:
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": -32002, "message": "no such buffer"},
                }
            )

        client.answer_overrides["fs/read_text_file"] = refuse
        reply = await client.prompt(session_id, '@tool read_file {"path": "a.txt"}')
    assert reply["result"] == {"stopReason": "end_turn"}
    last = tool_updates(client, session_id)[-1]
    assert last["status"] == "failed"
    assert "no such buffer" in json.dumps(last["content"])
    assert "no such buffer" in chunk_text(client, session_id)  # the model saw it too


async def test_a_malformed_fs_read_reply_fails_the_tool_call_not_the_prompt(
    connection: Connection, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)

        async def malformed(request: dict[str, Any]) -> None:
            await client.send({"jsonrpc": "2.0", "id": request["id"], "result": {"contents": 5}})

        client.answer_overrides["fs/read_text_file"] = malformed
        reply = await client.prompt(session_id, '@tool read_file {"path": "a.txt"}')
        assert reply.get("result") == {"stopReason": "end_turn"}, reply
        assert tool_updates(client, session_id)[-1]["status"] == "failed"


async def test_an_empty_prompt_is_invalid_params(connection: Connection, tmp_path: Path) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        error = await client.error("session/prompt", {"sessionId": session_id, "prompt": []})
    assert error["code"] == -32602
    assert "empty" in error["message"]


async def test_audio_content_which_we_do_not_advertise_is_invalid_params(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        result = await client.initialize()
        assert result["agentCapabilities"]["promptCapabilities"].get("audio") is not True
        session_id = await client.new_session(tmp_path)
        audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
        error = await client.error("session/prompt", {"sessionId": session_id, "prompt": [audio]})
    assert error["code"] == -32602
    assert "audio" in error["message"]


async def test_resource_links_and_embedded_resources_reach_the_model(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        prompt = [
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "uri": "file:///x/y.py", "name": "y.py"},
            {"type": "resource", "resource": {"uri": "file:///x/z.py", "text": "print(42)"}},
        ]
        reply = await client.request("session/prompt", {"sessionId": session_id, "prompt": prompt})
    assert reply["result"] == {"stopReason": "end_turn"}
    echoed = chunk_text(client, session_id)
    assert "file:///x/y.py" in echoed
    assert "print(42)" in echoed


async def test_authenticate_with_an_advertised_method_answers_a_valid_response(
    connection: Connection,
) -> None:
    from acp.schema import AuthenticateResponse

    async with connection() as client:
        result = await client.initialize()
        method_id = result["authMethods"][0]["id"]
        answer = await client.call("authenticate", {"methodId": method_id})
    AuthenticateResponse.model_validate(answer)


async def test_session_close_cancels_the_running_prompt_and_forgets_the_session(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        request_id = await client.start_prompt(session_id, f"@slow 0.2\n{SLOW_WORDS}")
        await client.wait_for(is_chunk(session_id))
        assert await client.call("session/close", {"sessionId": session_id}) == {}
        assert (await client.reply(request_id))["result"] == {"stopReason": "cancelled"}
        error = await client.error("session/prompt", prompt_params(session_id))
        assert error["code"] == -32002


async def test_when_input_ends_mid_turn_the_prompt_still_answers_cancelled(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        request_id = await client.start_prompt(session_id, f"@slow 0.5\n{SLOW_WORDS}")
        await client.wait_for(is_chunk(session_id))
        await client.close()  # the editor went away mid-turn
        reply = await client.wait_for(is_reply(request_id), within=5)
    assert reply["result"] == {"stopReason": "cancelled"}
