"""The check every in-process test relies on (`FakeClient.schema_problems`) can fail: frames
read from the wire are checked against the dialect the first answered `initialize`
negotiated, catch-all branches closed, with only the allow-listed exceptions."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from fake_acp_client import FakeClient

pytestmark = pytest.mark.anyio

V2_TOOL_CALL = {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "title": "Read"}


def _update(update: dict[str, Any]) -> dict[str, Any]:
    params = {"sessionId": "sess_1", "update": update}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


async def _problems(protocol_version: int, *from_agent: dict[str, Any]) -> list[str]:
    """What a client that sent `initialize` (then `session/prompt`) finds wrong in the agent
    frames `from_agent`, read from the wire after an accepted initialize answer."""
    to_agent, sent = anyio.create_memory_object_stream[bytes](16)
    agent_output, from_agent_stream = anyio.create_memory_object_stream[bytes](16)
    async with anyio.create_task_group() as tg, sent, to_agent:
        client = FakeClient(to_agent, tg)
        await client.send(
            client.next_request("initialize", {"protocolVersion": protocol_version})[1]
        )
        await client.send(client.next_request("session/prompt", {})[1])
        info = {"name": "acp-agent", "version": "0.1.0"}
        initialized = {"protocolVersion": protocol_version, "info": info}
        async with agent_output:
            for frame in [{"jsonrpc": "2.0", "id": 1, "result": initialized}, *from_agent]:
                await agent_output.send(json.dumps(frame).encode() + b"\n")
        await client.read_frames(from_agent_stream)
    return client.schema_problems


async def test_a_v1_update_on_a_v2_connection_is_named_as_a_problem() -> None:
    v1_call = {"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "Read"}

    assert await _problems(1, _update(v1_call)) == []
    [problem] = await _problems(2, _update(v1_call))
    assert "not a valid UpdateSessionNotification" in problem and '"tool_call"' in problem
    assert await _problems(2, _update(V2_TOOL_CALL)) == []


async def test_an_answer_is_checked_as_the_response_of_the_method_it_answers() -> None:
    answer = {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}

    assert await _problems(1, answer) == []
    [problem] = await _problems(2, answer)  # a v2 prompt is answered with its user message id
    assert "not a valid PromptResponse" in problem


async def test_an_error_without_its_code_fails_and_only_allow_listed_kinds_pass_open() -> None:
    error = {"jsonrpc": "2.0", "id": 2, "error": {"message": "failed"}}
    [problem] = await _problems(1, error)
    assert "not a valid Error" in problem

    assert await _problems(2, _update({"sessionUpdate": "replay_complete"})) == []
    [problem] = await _problems(2, _update({"sessionUpdate": "replay_completed"}))
    assert "replay_completed" in problem
