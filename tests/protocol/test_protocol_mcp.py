"""MCP servers over the wire, in-process: the agent is served on memory streams and driven
by `FakeClient`; its MCP servers are real (tests/mcp_servers/everything.py over stdio). The
offline echo provider scripts the model's tool calls (`@tool NAME {json}`) and reports
what each returned.

What the editor sees: elicitation as `elicitation/create`, `/mcp`, the servers' prompts as
slash commands, failure reports held until the editor knows the session, commands announced
again only when they change, and `/mcp` kept in the history a load replays.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import CreateFormSessionElicitationRequest, SessionNotification
from fake_acp_client import ZED_CLIENT_CAPABILITIES, FakeClient

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

SERVERS = Path(__file__).resolve().parent.parent / "mcp_servers"
ELICITING_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {**copy.deepcopy(ZED_CLIENT_CAPABILITIES), "elicitation": {"form": {}}},
    "clientInfo": {"name": "zed", "version": "0.200.0", "title": "Zed"},
}
"""Zed's handshake plus form elicitation (schema 1.25: `clientCapabilities.elicitation`)."""
MISSING = {"name": "ghost", "command": "/nonexistent/mcp-server", "args": [], "env": []}


def everything(name: str = "box", *args: str) -> dict[str, Any]:
    """The test server as an ACP `McpServerStdio` entry."""
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(SERVERS / "everything.py"), *args],
        "env": [],
    }


async def open_session(
    client: FakeClient, cwd: Path, *servers: dict[str, Any], initialize: Any = None
) -> tuple[str, int]:
    """Initialize, start a session with `servers`: its id and the index of its answer."""
    await client.initialize(initialize)
    request_id = await client.start_request(
        "session/new", {"cwd": str(cwd), "mcpServers": list(servers)}
    )
    reply = await client.reply(request_id)
    assert "error" not in reply, reply
    return reply["result"]["sessionId"], client.frames.index(reply)


async def run(client: FakeClient, session_id: str, text: str) -> str:
    reply = await client.prompt(session_id, text)
    assert "error" not in reply, reply
    return str(reply["result"]["stopReason"])


def updates(
    client: FakeClient, session_id: str, start: int = 0
) -> list[tuple[int, dict[str, Any]]]:
    """(frame index, update) of the session's `session/update`s from frame `start` on."""
    return [
        (index, frame["params"]["update"])
        for index, frame in enumerate(client.frames)
        if index >= start
        and frame.get("method") == "session/update"
        and frame["params"]["sessionId"] == session_id
    ]


def agent_text(client: FakeClient, session_id: str, start: int = 0) -> str:
    return "".join(
        u["content"]["text"]
        for _, u in updates(client, session_id, start)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


def command_updates(client: FakeClient, session_id: str) -> list[list[dict[str, Any]]]:
    return [
        u["availableCommands"]
        for _, u in updates(client, session_id)
        if u["sessionUpdate"] == "available_commands_update"
    ]


def tool_results(client: FakeClient, session_id: str, start: int = 0) -> dict[str, str]:
    """Each finished tool call's title and the text it showed."""
    titles: dict[str, str] = {}
    shown: dict[str, str] = {}
    for _, update in updates(client, session_id, start):
        if update["sessionUpdate"] == "tool_call":
            titles[update["toolCallId"]] = update["title"]
        elif update["sessionUpdate"] == "tool_call_update" and update.get("content"):
            shown[titles[update["toolCallId"]]] = "".join(
                item["content"]["text"] for item in update["content"]
            )
    return shown


def announces(command: str) -> Callable[[dict[str, Any]], bool]:
    """Matches the commands update that has `command` (the servers connect after the
    session's answer: their prompts come in a later update than ours)."""

    def match(frame: dict[str, Any]) -> bool:
        update = frame.get("params", {}).get("update", {})
        return any(c["name"] == command for c in update.get("availableCommands", ()))

    return match


def reports(server: str) -> Callable[[dict[str, Any]], bool]:
    """Matches the frame that reports `server` to the user."""

    def match(frame: dict[str, Any]) -> bool:
        update = frame.get("params", {}).get("update", {})
        text = update.get("content", {}).get("text", "") if isinstance(update, dict) else ""
        return update.get("sessionUpdate") == "agent_message_chunk" and f"'{server}'" in text

    return match


def answer_with(client: FakeClient, result: dict[str, Any]) -> None:
    """Answer `elicitation/create` with `result`."""

    async def answer(request: dict[str, Any]) -> None:
        await client.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    client.answer_overrides["elicitation/create"] = answer


# --- elicitation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "server_sees"),
    [
        ({"action": "accept", "content": {"name": "Ada", "age": 36}}, "accept: Ada 36"),
        ({"action": "decline"}, "decline"),
        ({"action": "cancel"}, "cancel"),
    ],
)
async def test_an_mcp_elicitation_becomes_elicitation_create_and_the_answer_goes_back(
    connection: Connection, tmp_path: Path, answer: dict[str, Any], server_sees: str
) -> None:
    async with connection() as client:
        answer_with(client, answer)
        sid, _ = await open_session(client, tmp_path, everything(), initialize=ELICITING_INITIALIZE)
        stop = await run(client, sid, "@tool mcp__box__ask {}")

    assert stop == "end_turn"
    [asked] = client.agent_requests_for("elicitation/create")
    request = CreateFormSessionElicitationRequest.model_validate(asked)
    assert request.session_id == sid
    assert request.message == "box: Who are you?", "the message names the server"
    assert request.mode == "form"
    [call] = [u for _, u in updates(client, sid) if u["sessionUpdate"] == "tool_call"]
    assert asked["toolCallId"] == call["toolCallId"], "tied to the call that made it ask"
    schema = request.requested_schema
    assert set(schema.properties or {}) == {"name", "age"}
    assert set(schema.required or []) == {"name", "age"}
    assert tool_results(client, sid) == {"box: ask": server_sees}


async def test_without_the_elicitation_capability_a_server_is_declined_and_the_editor_not_asked(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path, everything())
        stop = await run(client, sid, "@tool mcp__box__ask {}")

    assert stop == "end_turn"
    assert client.agent_requests_for("elicitation/create") == []
    assert tool_results(client, sid) == {"box: ask": "error: Elicitation not supported"}


async def test_cancelling_the_prompt_withdraws_a_pending_elicitation(
    connection: Connection, tmp_path: Path
) -> None:
    asked = anyio.Event()

    async def never_answer(request: dict[str, Any]) -> None:
        asked.set()

    async with connection() as client:
        client.answer_overrides["elicitation/create"] = never_answer
        sid, _ = await open_session(client, tmp_path, everything(), initialize=ELICITING_INITIALIZE)
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "bypass"})
        prompt_id = await client.start_prompt(sid, "@tool mcp__box__ask {}")
        with anyio.fail_after(30):
            await asked.wait()
        await client.notify("session/cancel", {"sessionId": sid})
        reply = await client.reply(prompt_id)
        [request] = [r for r in client.agent_requests if r["method"] == "elicitation/create"]
        withdrawn = await client.wait_for(
            lambda f: (
                f.get("method") == "$/cancel_request"
                and f["params"].get("requestId") == request["id"]
            )
        )
        after = await run(client, sid, "still here")

    assert reply["result"]["stopReason"] == "cancelled"
    assert withdrawn["params"]["requestId"] == request["id"]
    assert after == "end_turn"


# --- /mcp ------------------------------------------------------------------------------------


async def test_mcp_shows_each_servers_state_tools_prompts_and_failure(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path, everything(), MISSING)
        await client.wait_for(reports("ghost"))
        start = len(client.frames)
        stop = await run(client, sid, "/mcp")
        shown = agent_text(client, sid, start)

    assert stop == "end_turn"
    box, ghost = shown.split("\n\n")
    assert box.startswith(f"MCP server 'box' ({sys.executable} {SERVERS / 'everything.py'}): ready")
    assert "  tools: mcp__box__echo, mcp__box__fetch_page, mcp__box__wipe" in box
    assert "  prompts: /box:greet, /box:review" in box
    assert ghost == (
        "MCP server 'ghost' (/nonexistent/mcp-server): "
        "cannot start '/nonexistent/mcp-server': command not found"
    )


async def test_mcp_without_servers_says_so(connection: Connection, tmp_path: Path) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path)
        await run(client, sid, "/mcp")
        shown = agent_text(client, sid)

    assert shown.startswith("No MCP servers")


async def test_an_mcp_tool_call_shows_its_server_tool_input_and_raw_output(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path, everything())
        assert await run(client, sid, '@tool mcp__box__echo {"text": "ping"}') == "end_turn"
        calls = [u for _, u in updates(client, sid) if u["sessionUpdate"].startswith("tool_call")]

    started, finished = calls[0], calls[-1]
    assert started["name"] == "mcp__box__echo" and "box" in started["title"]
    assert started["rawInput"] == {"text": "ping"}
    assert finished["status"] == "completed"
    assert "ping" in json.dumps(finished["rawOutput"])


async def test_resuming_a_live_session_with_other_servers_connects_those(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path, everything("box"))
        await run(client, sid, "/mcp")
        before = agent_text(client, sid)
        reply = await client.reply(
            await client.start_request(
                "session/resume",
                {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": [everything("crate")]},
            )
        )
        assert "error" not in reply, reply
        start = len(client.frames)
        await run(client, sid, "/mcp")
        after = agent_text(client, sid, start)

    assert "MCP server 'box'" in before
    assert after.startswith("MCP server 'crate'") and "'box'" not in after
    assert "mcp__crate__echo" in after


async def test_mcp_is_kept_in_the_history_and_replayed_on_load(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path, everything())
        await run(client, sid, "/mcp")
        live = agent_text(client, sid)
    async with connection() as client:
        await client.initialize()
        start = len(client.frames)
        request_id = await client.start_request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": [everything()]}
        )
        reply = await client.reply(request_id)
        answered = client.frames.index(reply)
        replayed = [u for i, u in updates(client, sid, start) if i < answered]
        # Told again (before or after the answer): this client shows the session afresh.
        await client.wait_for(
            lambda f: (
                f.get("params", {}).get("update", {}).get("sessionUpdate")
                == "available_commands_update"
            )
        )

    assert "error" not in reply, reply
    user = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    agent = "".join(
        u["content"]["text"] for u in replayed if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert user == ["/mcp"]
    assert agent == live
    for update in replayed:
        SessionNotification.model_validate({"sessionId": sid, "update": update})


# --- prompts as slash commands ---------------------------------------------------------------


async def test_prompts_are_announced_as_commands_and_running_one_sends_its_messages_to_the_model(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path, everything())
        await client.wait_for(announces("box:greet"))
        greet = len(client.frames)
        assert await run(client, sid, "/box:greet Ada") == "end_turn"
        named = len(client.frames)
        assert await run(client, sid, "/box:greet name=Grace") == "end_turn"
        wrong = len(client.frames)
        assert await run(client, sid, "/box:greet Ada Grace") == "end_turn"
        history_request = len(client.frames)
        assert await run(client, sid, "what came before?") == "end_turn"

    *_, commands = command_updates(client, sid)
    by_name = {c["name"]: c for c in commands}
    assert {"model", "mcp", "box:greet", "box:review"} <= set(by_name)
    assert by_name["box:greet"] == {
        "name": "box:greet",
        "description": "Greet someone.",
        "input": {"hint": "name"},
    }
    assert agent_text(client, sid, greet).startswith("Echo: Please greet Ada warmly.")
    assert agent_text(client, sid, named).startswith("Echo: Please greet Grace warmly.")
    usage = agent_text(client, sid, wrong)
    assert "/box:greet: too many arguments" in usage and "Usage: /box:greet <name>" in usage
    assert agent_text(client, sid, history_request).startswith("Echo: what came before?")


async def test_commands_are_announced_again_only_when_they_change(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path, everything())
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "bypass"})
        await client.wait_for(announces("box:greet"))
        announced = len(command_updates(client, sid))
        assert await run(client, sid, "@tool mcp__box__grow {}") == "end_turn"
        after_tools_changed = len(command_updates(client, sid))
        assert await run(client, sid, "@tool mcp__box__grown {}") == "end_turn"
        assert await run(client, sid, "@tool mcp__box__grow_prompt {}") == "end_turn"
        after_prompts_changed = command_updates(client, sid)
        assert await run(client, sid, "/box:later MCP") == "end_turn"
        later = agent_text(client, sid)

    assert after_tools_changed == announced, "a new tool is no new command"
    assert tool_results(client, sid)["box: grown"] == "grown"
    assert len(after_prompts_changed) == announced + 1
    *_, first, second = after_prompts_changed
    assert [c["name"] for c in second] == [c["name"] for c in first] + ["box:later"]
    assert "Echo: Tell me about MCP." in later


# --- failure reports -------------------------------------------------------------------------


async def test_a_failure_is_reported_after_the_session_is_announced_and_only_once(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, answered = await open_session(client, tmp_path, everything(), MISSING)
        await client.wait_for(reports("ghost"))
        assert await run(client, sid, "first") == "end_turn"
        assert await run(client, sid, "second") == "end_turn"  # retried before each prompt

    sent = updates(client, sid)
    assert all(index > answered for index, _ in sent), "nothing before the editor knows the id"
    commands_at = next(i for i, u in sent if u["sessionUpdate"] == "available_commands_update")
    [(report_at, report)] = [
        (i, u["content"]["text"])
        for i, u in sent
        if u["sessionUpdate"] == "agent_message_chunk" and "'ghost'" in u["content"]["text"]
    ]
    assert report_at > commands_at
    assert "MCP server 'ghost' (/nonexistent/mcp-server)" in report
    assert "cannot start '/nonexistent/mcp-server': command not found" in report
    assert "The session goes on without it" in report and "/mcp" in report
    assert "'box'" not in agent_text(client, sid), "a server that works is not reported"


async def test_on_load_a_failure_is_reported_after_the_replayed_history(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        sid, _ = await open_session(client, tmp_path)
        await run(client, sid, "remember me")
    async with connection() as client:
        await client.initialize()
        start = len(client.frames)
        reply = await client.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": [MISSING]}
        )
        await client.wait_for(reports("ghost"))
        sent = updates(client, sid, start)

    assert "error" not in reply, reply
    history = [i for i, u in sent if u["sessionUpdate"] == "user_message_chunk"]
    [report_at] = [i for i, u in sent if "'ghost'" in str(u.get("content", {}).get("text", ""))]
    assert history and report_at > max(history)


# --- permissions by annotation, through the wire ----------------------------------------------


async def test_read_only_mode_offers_and_runs_only_read_only_mcp_tools(
    connection: Connection, tmp_path: Path
) -> None:
    # Read-only claims are believed of a server the config trusts (the editor's `box` runs
    # the same command as the config's).
    box = everything()
    trusted = tmp_path / "agent.toml"
    trusted.write_text(
        '[providers.echo]\ntype = "echo"\n\n[mcp_servers.box]\n'
        f"command = {json.dumps(box['command'])}\nargs = {json.dumps(box['args'])}\n"
        "trusted = true\n",
        encoding="utf-8",
    )
    async with connection(str(trusted)) as client:
        sid, _ = await open_session(client, tmp_path, box)
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
        text = '@tool mcp__box__echo {"text": "read"}\n@tool mcp__box__wipe {"path": "/x"}'
        assert await run(client, sid, text) == "end_turn"
        reported = agent_text(client, sid)

    assert client.agent_requests_for("session/request_permission") == []
    assert tool_results(client, sid)["box: echo"] == "read"
    assert "Tool mcp__box__echo returned:\nread" in reported
    assert "Tool mcp__box__wipe failed: Not run: mcp__box__wipe changes things" in reported
