"""ACP v2 end to end: `acp-agent` driven by the npm SDK's v2 client (`v2_client.mjs`), raw
JSON-RPC batches over its stdio, and a v1 client on another connection at the same time
that still gets v1.

Run `npm install` at the repository root first; without the SDK in `node_modules` (or
without node) the npm-driven test is skipped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from e2e_support import AGENT_COMMAND, needs_v2_sdk, run_v2_driver, sdk_agent
from fake_llm import FakeLLM, last_user_text
from test_e2e_plans_sdk import PlanClient  # an editor that keeps updates, no fs or terminal

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HANG_GUARD = 30.0
V2_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 2, "info": {"name": "raw", "version": "1"}, "capabilities": {}},
}


async def run_v2_client(
    env: dict[str, str], stderr: Path, cwd: Path, scenario: str = "life"
) -> dict[str, Any]:
    """What each step of `v2_client.mjs`'s `scenario` got from a fresh agent."""
    out = await asyncio.wait_for(run_v2_driver(env, stderr, cwd, scenario), HANG_GUARD)
    got: dict[str, Any] = json.loads(out)
    return got


@needs_v2_sdk
async def test_the_npm_v2_client_negotiates_v2_and_runs_a_session_life(
    agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    got = await run_v2_client(agent_env, agent_stderr, workspace)

    # Each `result` got past the SDK's own validation of the v2 answer.
    initialized = got["initialize"]["result"]
    assert initialized["protocolVersion"] == 2
    assert initialized["info"]["name"] == "acp-agent"
    assert [m["type"] for m in initialized["authMethods"]] == ["agent"]
    session_id = got["new"]["result"]["sessionId"]
    assert "modes" not in got["new"]["result"]
    assert {o["configId"] for o in got["new"]["result"]["configOptions"]} >= {"model", "mode"}
    assert session_id in [s["sessionId"] for s in got["list"]["result"]["sessions"]]
    mode = next(
        o for o in got["setConfigOption"]["result"]["configOptions"] if o["configId"] == "mode"
    )
    assert mode["currentValue"] == "read-only"
    # Modes are config options in v2, and sessions come back with `session/resume`.
    assert got["setMode"]["error"]["code"] == -32601
    assert got["load"]["error"]["code"] == -32601
    assert got["close"] == {"result": {}}
    assert got["logout"] == {"result": {}}
    kinds = [n["update"]["sessionUpdate"] for n in got["updates"]]
    assert "current_mode_update" not in kinds


def _arrival(arrivals: list[dict[str, Any]], test: Any, nth: int = 0) -> int:
    """The index of the `nth` arrival (0: the first) that `test` accepts."""
    return [i for i, arrival in enumerate(arrivals) if test(arrival)][nth]


def _answered(name: str) -> Any:
    return lambda arrival: arrival.get("answer") == name


def _update(kind: str, **fields: Any) -> Any:
    def test(arrival: dict[str, Any]) -> bool:
        update = arrival.get("update") or {}
        return update.get("sessionUpdate") == kind and all(
            update.get(name) == value for name, value in fields.items()
        )

    return test


@needs_v2_sdk
async def test_v2_prompts_answer_at_insertion_in_order_once_per_key_and_cancel(
    agent_env: dict[str, str], agent_stderr: Path, workspace: Path, fake_llm: FakeLLM
) -> None:
    got = await run_v2_client(agent_env, agent_stderr, workspace, "turns")
    arrivals = got["arrivals"]
    answers = {a["answer"]: a for a in arrivals if "answer" in a}
    # Every answer got past the SDK's validation of a v2 PromptResponse.
    prompts = {name: answer for name, answer in answers.items() if name != "resume"}
    ids = {name: answer["result"]["messageId"] for name, answer in prompts.items()}
    idle = _update("state_update", state="idle")

    # Answered at insertion, before the turn ends; its user message carries the same id.
    first = _arrival(arrivals, _answered("first"))
    assert first < _arrival(arrivals, idle, 0)
    echoed = arrivals[_arrival(arrivals, _update("user_message", messageId=ids["first"]))]
    assert echoed["update"]["content"] == [{"type": "text", "text": "one"}]
    assert _arrival(arrivals, _update("state_update", state="running")) < first + 2
    # Two prompts sent back to back: the second waited its turn, inserted after the
    # first one's idle, and went idle after it.
    second, third = _arrival(arrivals, _answered("second")), _arrival(arrivals, _answered("third"))
    assert second < _arrival(arrivals, idle, 1) < third < _arrival(arrivals, idle, 2)
    assert _arrival(arrivals, idle, 1) < _arrival(
        arrivals, _update("user_message", messageId=ids["third"])
    )
    assert [arrivals[_arrival(arrivals, idle, n)]["update"]["stopReason"] for n in range(6)] == [
        "end_turn",
        "end_turn",
        "end_turn",
        "end_turn",
        "cancelled",  # session/cancel ends the turn
        "end_turn",
    ]

    # The repeat with the same idempotency key got the first id and inserted nothing.
    assert ids["again"] == ids["once"]
    live = arrivals[: _arrival(arrivals, lambda a: "resuming" in a)]
    assert len([a for a in live if _update("user_message")(a)]) == 6
    asked = [e for e in fake_llm.exchanges if last_user_text(e.body) == "only once"]
    assert len(asked) == 1

    # A permission: the turn requires action while the user decides, then runs on.
    asking = _arrival(arrivals, lambda a: "asked" in a)
    assert arrivals[asking]["asked"]["subject"]["type"] == "tool_call"
    after_cancel = _arrival(arrivals, idle, 4)
    states = [
        a["update"]["state"] for a in arrivals[after_cancel + 1 :] if _update("state_update")(a)
    ]
    assert states[:4] == ["running", "requires_action", "running", "idle"]
    assert (workspace / "notes.txt").read_text() == "hi"

    # The resume from the start: the history (ids kept), one marker, the state, the answer.
    resuming = _arrival(arrivals, lambda a: "resuming" in a)
    after = arrivals[resuming:]
    answered = _arrival(after, _answered("resume"))
    assert "result" in after[answered]
    kinds = [a["update"]["sessionUpdate"] for a in after if "update" in a]
    assert kinds.count("replay_complete") == 1
    marker = kinds.index("replay_complete")
    # The SDK hands a notification on a little later than a response that follows it: the
    # state (sent before the answer, see test_v2_prompts) may show up after the answer.
    assert kinds[marker + 1 :] == ["state_update"]
    assert _arrival(after, _update("replay_complete")) < answered
    # Each replayed message is emptied once before its chunks (the client saw it live).
    resets = [a["update"]["messageId"] for a in after if _update("user_message", content=[])(a)]
    assert len(resets) == len(set(resets)), "one reset per message"
    assert set(ids.values()) <= set(resets), "every prompt's message is replayed"
    replayed = [a["update"] for a in after if _update("user_message_chunk")(a)]
    assert [u["messageId"] for u in replayed][:1] == [ids["first"]]
    assert "current_mode_update" not in kinds


@needs_v2_sdk
async def test_v2_cancels_one_tool_call_or_one_background_terminal_and_the_turn_goes_on(
    agent_env: dict[str, str], agent_stderr: Path, workspace: Path, fake_llm: FakeLLM
) -> None:
    from dialect_support import Transcript, assert_schema_valid

    out = await asyncio.wait_for(
        run_v2_driver(agent_env, agent_stderr, workspace, "pieces"), HANG_GUARD
    )
    wire = Transcript("v2", [json.loads(line) for line in out.splitlines()])
    assert_schema_valid(wire)  # every frame, both ways, as the v2 schema has it
    session_id = wire.result("new")["sessionId"]
    states = wire.updates(session_id, "state_update")
    idle = [s for s in states if s["state"] == "idle"]

    # The command's call, cancelled while it ran: that call ends `cancelled` and the model
    # hears why; the turn ends normally.
    assert wire.result("cancelCall") == {}
    calls = [u for u in wire.updates(session_id, "tool_call_update") if u.get("name") == "shell"]
    command_call = calls[0]["toolCallId"]
    final = [
        u for u in wire.updates(session_id, "tool_call_update") if u["toolCallId"] == command_call
    ]
    assert final[-1]["status"] == "cancelled"
    assert final[-1]["capabilities"] is None
    tool_results = [
        m["content"] for e in fake_llm.exchanges for m in e.body["messages"] if m["role"] == "tool"
    ]
    assert any("The user cancelled this tool call while it ran" in r for r in tool_results)
    assert idle[0]["stopReason"] == "end_turn"
    # Again once it ended: refused, naming the field.
    refused = wire.answer("cancelCallAgain")["error"]
    assert refused["code"] == -32602
    assert "toolCallId" in refused["message"]

    # The background job: listed on every state from its start, through the turn's end,
    # until its terminal (cancelled by the user) reported its exit.
    job_terminal = [u for u in wire.updates(session_id, "terminal_update") if "command" in u][-1]
    terminal_id = job_terminal["terminalId"]
    listed = [{"type": "terminal", "terminalId": terminal_id}]
    assert job_terminal["capabilities"] == {"cancel": {}}
    assert idle[1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
        "background": listed,
    }
    assert wire.result("cancelTerminal") == {}
    exited = [
        u
        for u in wire.updates(session_id, "terminal_update")
        if u["terminalId"] == terminal_id and "exitStatus" in u
    ]
    assert exited[0]["exitStatus"] == {"signal": "SIGTERM"}
    assert states[-1] == {"sessionUpdate": "state_update", "state": "idle", "background": []}
    updates = wire.updates(session_id)
    assert updates.index(exited[0]) < updates.index(states[-1])
    assert all("background" in state for state in states)


class RawAgent:
    """`acp-agent` on raw stdio: lines in, parsed frames out (an array for a batch)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def receive(self) -> Any:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), HANG_GUARD)
        assert line, "the agent closed its stdout"
        return json.loads(line)


@asynccontextmanager
async def raw_agent(env: dict[str, str], stderr_path: Path, cwd: Path) -> AsyncIterator[RawAgent]:
    """A fresh agent process on raw stdio; its input is closed and its exit awaited after."""
    with stderr_path.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            *AGENT_COMMAND,
            env=env,
            cwd=cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
        try:
            yield RawAgent(process)
        finally:
            assert process.stdin is not None
            process.stdin.close()
            await asyncio.wait_for(process.wait(), HANG_GUARD)


async def test_a_v2_connection_answers_batches_over_stdio(
    agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with raw_agent(agent_env, agent_stderr, workspace) as agent:
        await agent.send(V2_INITIALIZE)
        assert (await agent.receive())["result"]["protocolVersion"] == 2

        await agent.send([])
        empty = await agent.receive()
        assert (empty["id"], empty["error"]["code"]) == (None, -32600)

        cancel = {"sessionId": "nobody"}
        await agent.send([{"jsonrpc": "2.0", "method": "session/cancel", "params": cancel}])
        new = {"cwd": str(workspace)}
        await agent.send(
            [
                {"jsonrpc": "2.0", "id": "new", "method": "session/new", "params": new},
                {"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {}},
                42,
            ]
        )
        # The notification-only batch got nothing: the next frame answers this batch.
        answers = await agent.receive()
        assert isinstance(answers, list)
        by_id = {answer["id"]: answer for answer in answers}
        assert set(by_id) == {"new", 7, None}
        assert by_id["new"]["result"]["sessionId"]
        assert "sessions" in by_id[7]["result"]
        assert by_id[None]["error"]["code"] == -32600


async def test_a_v1_connection_beside_keeps_v1_and_refuses_batches(
    agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    from acp.schema import ClientCapabilities

    async with sdk_agent(
        PlanClient(),
        agent_env,
        agent_stderr,
        workspace,
        name="v1-beside-v2",
        capabilities=ClientCapabilities(),
        hang_guard=HANG_GUARD,
    ) as (conn, _, answer):
        session = await asyncio.wait_for(
            conn.new_session(cwd=str(workspace), mcp_servers=[]), HANG_GUARD
        )
    assert answer.protocol_version == 1
    assert answer.agent_capabilities is not None and answer.agent_capabilities.load_session
    assert session.modes is not None  # v1 keeps its modes

    # The same agent on raw stdio: a v1 connection refuses a batch as one -32600.
    async with raw_agent(agent_env, agent_stderr, workspace) as agent:
        await agent.send({**V2_INITIALIZE, "params": {"protocolVersion": 1}})
        assert (await agent.receive())["result"]["protocolVersion"] == 1
        await agent.send([{"jsonrpc": "2.0", "id": 1, "method": "session/list"}])
        refused = await agent.receive()
        assert isinstance(refused, dict)
        assert (refused["id"], refused["error"]["code"]) == (None, -32600)
