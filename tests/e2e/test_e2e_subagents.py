"""Subagents end to end: the agent as a subprocess, driven by the `agent-client-protocol`
client, the fake LLM scripted to call the `agent` tool.

Two subagents of one reply run at the same time, each a session of its own; a client that
advertised `subagents` is told of each child before its updates, which carry the child's
id, and can cancel just one child; any other client sees the work inside the parent's tool
call; a subagent cannot start subagents of its own; closing the parent ends its children.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.connection import StreamDirection, StreamEvent
from e2e_support import AGENT_COMMAND, checked_agent_process
from fake_llm import FakeLLM, last_user_text

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

TIMEOUT = 30.0


class Editor:
    """An editor stand-in. It reads every `session/update` off the wire (the pinned client's
    models know no `subagent_update`, so its own callback never sees those)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.arrived = asyncio.Event()

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if (
            event.direction == StreamDirection.INCOMING
            and message.get("method") == "session/update"
        ):
            params = message["params"]
            self.updates.append((params["sessionId"], params["update"]))
            self.arrived.set()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass  # read off the wire instead (above)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")

    def kinds(self, session_id: str) -> list[str]:
        return [u["sessionUpdate"] for sid, u in self.updates if sid == session_id]

    def text(self, session_id: str) -> str:
        return "".join(
            u["content"]["text"]
            for sid, u in self.updates
            if sid == session_id and u["sessionUpdate"] == "agent_message_chunk"
        )

    async def wait_for(self, condition: Any) -> None:
        async with asyncio.timeout(TIMEOUT):
            while not condition():
                self.arrived.clear()
                await self.arrived.wait()


def agent_call(description: str, prompt: str) -> str:
    return f"[[tool agent {json.dumps({'description': description, 'prompt': prompt})}]]"


@asynccontextmanager
async def connected(
    env: dict[str, str], stderr: Path, cwd: Path, *, subagents: bool
) -> AsyncIterator[tuple[Any, Editor]]:
    editor = Editor()
    capabilities: dict[str, Any] = {"subagents": {}} if subagents else {}
    with stderr.open("ab") as err:
        async with checked_agent_process(
            editor,
            *AGENT_COMMAND,
            env=env,
            cwd=cwd,
            transport_kwargs={"stderr": err},
            observers=[editor.observe],
        ) as (conn, _):
            await asyncio.wait_for(
                conn._conn.send_request(
                    "initialize",
                    {
                        "protocolVersion": 1,
                        "clientCapabilities": capabilities,
                        "clientInfo": {"name": "e2e-subagents", "version": "0"},
                    },
                ),
                TIMEOUT,
            )
            yield conn, editor


def subagent_updates(editor: Editor, parent: str) -> list[dict[str, Any]]:
    """The `subagent_update`s on the parent, as sent (the pinned client's models lack them)."""
    return [
        update
        for sid, update in editor.updates
        if sid == parent and update["sessionUpdate"] == "subagent_update"
    ]


async def test_two_subagents_run_at_once_each_a_session_under_its_own_id(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    parent_prompt = agent_call("count one", "[[slow 0.4]] one two three") + agent_call(
        "count two", "[[slow 0.4]] four five six"
    )
    async with connected(agent_env, agent_stderr, workspace, subagents=True) as (conn, editor):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        parent = session.session_id
        result = await asyncio.wait_for(
            conn.prompt(session_id=parent, prompt=[text_block(parent_prompt)]), TIMEOUT
        )
        listed = await asyncio.wait_for(conn.list_sessions(), TIMEOUT)

    assert result.stop_reason == "end_turn"
    announced = subagent_updates(editor, parent)
    children = list(dict.fromkeys(u["sessionId"] for u in announced))
    assert len(children) == 2 and parent not in children
    for child in children:
        states = [u["state"]["state"] for u in announced if u["sessionId"] == child]
        assert states == ["running", "idle"]
        assert editor.kinds(child), "the child's own updates carry its id"
        first_child_update = next(i for i, (sid, _) in enumerate(editor.updates) if sid == child)
        first_announce = next(
            i
            for i, (sid, u) in enumerate(editor.updates)
            if sid == parent and u["sessionUpdate"] == "subagent_update"
        )
        assert first_announce < first_child_update
    assert {editor.text(c).strip() for c in children} == {
        "Fake reply to: one two three",
        "Fake reply to: four five six",
    }
    # Both children's requests were in flight at once: each arrived before the other ended.
    first, second = (
        e for e in fake_llm.exchanges if last_user_text(e.body).endswith(("three", "six"))
    )
    assert first.ended is not None and second.started < first.ended
    # The parent got both reports as its tool results, in the calls' order.
    follow_up = json.dumps(fake_llm.requests[-1]["messages"][-2:])
    assert follow_up.index("one two three") < follow_up.index("four five six")
    assert {s.session_id for s in listed.sessions} >= {parent, *children}


async def test_a_client_without_subagents_sees_the_work_in_the_parents_tool_call(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    child_task = '[[tool read_file {"path": "hello.txt"}]] read it'
    async with connected(agent_env, agent_stderr, workspace, subagents=False) as (conn, editor):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        parent = session.session_id
        await asyncio.wait_for(
            conn.prompt(
                session_id=parent, prompt=[text_block(agent_call("read hello", child_task))]
            ),
            TIMEOUT,
        )

    assert {sid for sid, _ in editor.updates} == {parent}  # nothing under another id
    assert "subagent_update" not in editor.kinds(parent)
    progress = [u for _, u in editor.updates if u["sessionUpdate"] == "tool_call_update"]
    shown = json.dumps(progress)
    assert "Read" in shown and "hello.txt" in shown  # the child's tool call, as a line
    done = [u for u in progress if u.get("status") == "completed"]
    assert done and "Tool result:" in json.dumps(done[-1])


async def test_a_subagent_cannot_start_subagents_of_its_own(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    nested = agent_call("inner", "never runs")
    async with connected(agent_env, agent_stderr, workspace, subagents=True) as (conn, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await asyncio.wait_for(
            conn.prompt(
                session_id=session.session_id,
                prompt=[text_block(agent_call("outer", nested + " try"))],
            ),
            TIMEOUT,
        )

    parent_tools = {t["function"]["name"] for t in fake_llm.requests[0]["tools"]}
    child_tools = {t["function"]["name"] for t in fake_llm.requests[1]["tools"]}
    assert "agent" in parent_tools
    assert "agent" not in child_tools
    assert "There is no tool named 'agent'" in json.dumps(fake_llm.requests[2]["messages"])


async def slow_child_streaming(
    conn: Any, editor: Editor, workspace: Path
) -> tuple[str, str, asyncio.Future[Any]]:
    """A new session whose prompt starts one slow subagent, once the child streams: the
    parent's id, the child's id and the parent's running prompt."""
    session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
    parent = session.session_id
    slow = "[[slow 1]] " + " ".join(f"w{i}" for i in range(30))
    turn = asyncio.ensure_future(
        conn.prompt(session_id=parent, prompt=[text_block(agent_call("slow", slow))])
    )
    await editor.wait_for(lambda: subagent_updates(editor, parent))
    child = str(subagent_updates(editor, parent)[0]["sessionId"])
    await editor.wait_for(lambda: editor.text(child))
    return parent, child, turn


async def test_cancelling_a_child_by_its_id_stops_only_the_child(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with connected(agent_env, agent_stderr, workspace, subagents=True) as (conn, editor):
        parent, child, turn = await slow_child_streaming(conn, editor, workspace)
        await conn.cancel(session_id=child)
        result = await asyncio.wait_for(turn, TIMEOUT)

    assert result.stop_reason == "end_turn"  # the parent went on
    states = [u["state"] for u in subagent_updates(editor, parent)]
    assert states[-1] == {"state": "idle", "stopReason": "cancelled"}
    assert "cancelled" in json.dumps(fake_llm.requests[-1]["messages"][-1])


async def test_closing_the_parent_ends_its_children_and_loading_it_replays_their_link(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with connected(agent_env, agent_stderr, workspace, subagents=True) as (conn, editor):
        parent, child, turn = await slow_child_streaming(conn, editor, workspace)
        await asyncio.wait_for(
            conn._conn.send_request("session/close", {"sessionId": parent}), TIMEOUT
        )
        result = await asyncio.wait_for(turn, TIMEOUT)
        with pytest.raises(RequestError) as gone:
            await asyncio.wait_for(
                conn.prompt(session_id=child, prompt=[text_block("still there?")]), TIMEOUT
            )
        editor.updates.clear()
        await asyncio.wait_for(
            conn.load_session(cwd=str(workspace), session_id=parent, mcp_servers=[]), TIMEOUT
        )

    assert result.stop_reason == "cancelled"
    assert gone.value.code == -32002  # closed with its parent: not live any more
    replayed = subagent_updates(editor, parent)
    assert replayed and replayed[0]["sessionId"] == child
