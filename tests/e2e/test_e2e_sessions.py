"""Sessions that survive a restart of the agent process, driven by the `agent-client-protocol`
package's own client against the fake OpenAI server.

Each test starts `python -m acp_agent` more than once on one state dir (`XDG_STATE_HOME` in
the agent's env): the second process knows only what the first wrote to disk. The fake
server answers 400 to a conversation OpenAI would reject (a tool call without its result),
so a turn that ends `end_turn` after a load proves the restored history is valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
from pathlib import Path
from typing import Any

import pytest
from acp.schema import (
    AgentMessageChunk,
    SessionInfoUpdate,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)
from e2e_support import children_of, needs_proc
from fake_llm import FakeLLM, fake_reply, message_text
from test_e2e_sdk_client import RecordingClient, prompt, running_agent

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HANG_GUARD = 15.0
"""Seconds before a hang counts as a failure (every wait here ends on an event)."""
INTERRUPTED = "Not run: the session ended before this tool call finished."


@pytest.fixture
def state_home(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def state_env(agent_env: dict[str, str], state_home: Path) -> dict[str, str]:
    """The agent's env with its state dir (`$XDG_STATE_HOME/acp-agent`) in the test's
    directory; every process of a test shares it."""
    return {**agent_env, "XDG_STATE_HOME": str(state_home)}


async def ask(conn: Any, session_id: str, text: str) -> str:
    result = await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=prompt(text)), HANG_GUARD
    )
    return str(result.stop_reason)


async def load(conn: Any, client: RecordingClient, session_id: str, cwd: Path, users: int) -> Any:
    """`session/load`, once the replay of `users` prompts has reached the client."""
    response = await asyncio.wait_for(
        conn.load_session(cwd=str(cwd), session_id=session_id, mcp_servers=[]), HANG_GUARD
    )
    await client.wait_until(lambda: len(user_texts(client, session_id)) >= users, HANG_GUARD)
    return response


def user_texts(client: RecordingClient, session_id: str) -> list[str]:
    return [
        u.content.text
        for u in client.of(session_id)
        if isinstance(u, UserMessageChunk) and u.content.type == "text"
    ]


def replies(client: RecordingClient, session_id: str) -> dict[str | None, str]:
    """Agent message text joined per `messageId`."""
    joined: dict[str | None, str] = {}
    for update in client.of(session_id):
        if isinstance(update, AgentMessageChunk) and update.content.type == "text":
            key = update.message_id
            joined[key] = joined.get(key, "") + update.content.text
    return joined


def final_statuses(client: RecordingClient, session_id: str) -> dict[str, str | None]:
    statuses: dict[str, str | None] = {}
    for update in client.of(session_id):
        started = isinstance(update, ToolCallStart)
        if started or (isinstance(update, ToolCallProgress) and update.status is not None):
            statuses[update.tool_call_id] = update.status
    return statuses


def commands_running(agent_pid: int, command: str) -> list[int]:
    """The agent's children running `command` (bash runs a simple one in its own place);
    other children, such as a short `uname` a vendor SDK runs, do not count."""
    found = []
    for pid in children_of(agent_pid):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            if command.encode() in (argv[-1], b" ".join(argv)):
                found.append(pid)
    return found


def files_under(directory: Path) -> list[Path]:
    return [path for path in directory.rglob("*") if path.is_file()]


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


async def test_a_restarted_agent_loads_the_session_and_the_model_gets_the_whole_history(
    fake_llm: FakeLLM, state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    read = '[[tool read_file {"path": "hello.txt"}]]'
    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, client):
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        assert await ask(conn, session_id, "first question") == "end_turn"
        assert await ask(conn, session_id, read) == "end_turn"
        live = replies(client, session_id)
    before = fake_llm.requests[-1]["messages"]

    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, client):
        response = await load(conn, client, session_id, workspace, users=2)
        replayed = replies(client, session_id)
        statuses = final_statuses(client, session_id)
        assert await ask(conn, session_id, "third question") == "end_turn"

    assert response.modes is not None and response.modes.current_mode_id == "ask"
    assert user_texts(client, session_id) == ["first question", read]
    assert None not in live and replayed == live, "replayed chunks keep their messageId"
    assert list(statuses.values()) == ["completed"]
    after = fake_llm.requests[-1]["messages"]
    assert after[1 : len(before)] == before[1:], "the model gets the whole prior history"
    assistant, user = after[len(before) :]
    assert assistant["role"] == "assistant"
    assert message_text(assistant) == list(live.values())[-1]
    assert user == {"role": "user", "content": "third question"}
    assert roles(after) == [
        "system", "user", "assistant", "user", "assistant", "tool", "assistant", "user"
    ]  # fmt: skip


async def test_a_fork_goes_its_own_way_and_the_original_never_sees_it(
    fake_llm: FakeLLM, state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, _):
        original = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        assert await ask(conn, original, "shared question") == "end_turn"
        fork = (await conn.fork_session(session_id=original, cwd=str(workspace))).session_id
        assert await ask(conn, fork, "fork question") == "end_turn"
    fork_request = fake_llm.requests[-1]["messages"]

    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, client):
        await load(conn, client, original, workspace, users=1)
        assert await ask(conn, original, "original question") == "end_turn"
    original_request = fake_llm.requests[-1]["messages"]

    assert fork != original
    assert [message_text(m) for m in fork_request[1:]] == [
        "shared question",
        fake_reply("shared question"),
        "fork question",
    ]
    assert [message_text(m) for m in original_request[1:]] == [
        "shared question",
        fake_reply("shared question"),
        "original question",
    ]
    assert user_texts(client, original) == ["shared question"]


@needs_proc
async def test_killed_while_the_model_streams_the_session_loads_and_goes_on(
    fake_llm: FakeLLM, state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    slow = "[[slow 0.5]] second question, answered slowly"
    async with running_agent(state_env, agent_stderr, workspace) as (conn, process, client):
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        assert await ask(conn, session_id, "first question") == "end_turn"
        shown = len(client.chunks(session_id))
        streaming = asyncio.create_task(ask(conn, session_id, slow))
        await client.wait_until(lambda: len(client.chunks(session_id)) > shown, HANG_GUARD)
        process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), HANG_GUARD)
        streaming.cancel()
        with contextlib.suppress(BaseException):
            await streaming
    assert fake_llm.wait_for_disconnect(HANG_GUARD) is not None

    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, client):
        await load(conn, client, session_id, workspace, users=2)
        assert await ask(conn, session_id, "third question") == "end_turn"

    assert user_texts(client, session_id) == ["first question", slow]
    after = fake_llm.requests[-1]["messages"]
    assert roles(after) == ["system", "user", "assistant", "user", "user"]
    assert [message_text(m) for m in after[3:]] == [slow, "third question"]


@needs_proc
async def test_killed_while_a_tool_runs_the_call_is_answered_and_shown_failed_on_load(
    fake_llm: FakeLLM, state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    command = f"sleep {30 + secrets.randbelow(1000) / 1000:.3f}"
    tool = f'[[tool shell {{"command": "{command}"}}]]'
    async with running_agent(state_env, agent_stderr, workspace) as (conn, process, client):
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        running = asyncio.create_task(ask(conn, session_id, tool))
        # The command runs and the client saw its call start.
        await client.wait_until(
            lambda: commands_running(process.pid, command) and final_statuses(client, session_id),
            HANG_GUARD,
        )
        commands = commands_running(process.pid, command)
        process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), HANG_GUARD)
        for pid in commands:  # the command's process group outlives the agent: end it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        running.cancel()
        with contextlib.suppress(BaseException):
            await running
        [call_id] = final_statuses(client, session_id)

    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, client):
        await load(conn, client, session_id, workspace, users=1)
        statuses = final_statuses(client, session_id)
        assert await ask(conn, session_id, "what happened?") == "end_turn"

    assert statuses == {call_id: "failed"}, "no call is left running on screen"
    after = fake_llm.requests[-1]["messages"]
    assert roles(after) == ["system", "user", "assistant", "tool", "user"]
    [call] = after[2]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"command": command}
    assert after[3]["tool_call_id"] == call["id"]
    assert message_text(after[3]).endswith(INTERRUPTED)  # an error result: "Error: ..."


@needs_proc
async def test_close_during_a_running_command_cancels_the_prompt_and_ends_the_command(
    fake_llm: FakeLLM, state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    tool = '[[tool shell {"command": "sleep 30"}]]'
    async with running_agent(state_env, agent_stderr, workspace) as (conn, process, client):
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        running = asyncio.create_task(ask(conn, session_id, tool))
        await client.wait_until(lambda: commands_running(process.pid, "sleep 30"), HANG_GUARD)
        await asyncio.wait_for(conn.close_session(session_id=session_id), HANG_GUARD)
        stop = await asyncio.wait_for(running, HANG_GUARD)
        await client.wait_until(lambda: not commands_running(process.pid, "sleep 30"), HANG_GUARD)
        await load(conn, client, session_id, workspace, users=1)
        assert await ask(conn, session_id, "and now?") == "end_turn"

    assert stop == "cancelled"
    assert list(final_statuses(client, session_id).values()) == ["failed"]


async def test_read_only_mode_survives_a_restart_and_refuses_the_next_write(
    fake_llm: FakeLLM, state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    hello = workspace / "hello.txt"
    before = hello.read_text()
    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, _):
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=session_id, mode_id="read-only")

    write = '[[tool write_file {"path": "hello.txt", "content": "overwritten"}]]'
    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, client):
        response = await asyncio.wait_for(
            conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[]),
            HANG_GUARD,
        )
        assert await ask(conn, session_id, write) == "end_turn"

    assert response.modes is not None and response.modes.current_mode_id == "read-only"
    [mode] = [o for o in response.config_options or [] if o.id == "mode"]
    assert mode.current_value == "read-only"
    assert list(final_statuses(client, session_id).values()) == ["failed"]
    assert client.writes == [] and client.permission_requests == []
    assert hello.read_text() == before
    tools = [t["function"]["name"] for t in fake_llm.requests[-1].get("tools", [])]
    assert "write_file" not in tools


async def test_the_first_turn_titles_the_session_for_the_editor_and_the_list(
    fake_llm: FakeLLM, state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(state_env, agent_stderr, workspace) as (conn, _, client):
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await ask(conn, session_id, "Why does the login test fail on Mondays?")
        [info] = [u for u in client.of(session_id) if isinstance(u, SessionInfoUpdate)]
        listed = await conn.list_sessions(cwd=str(workspace))

    assert info.title == "Why does the login test fail on Mondays?"
    [summary] = listed.sessions
    assert (summary.session_id, summary.title) == (session_id, info.title)
    assert summary.updated_at is not None and summary.updated_at >= (info.updated_at or "")


async def test_an_api_key_never_reaches_the_state_dir(
    fake_llm: FakeLLM,
    state_env: dict[str, str],
    state_home: Path,
    agent_stderr: Path,
    workspace: Path,
) -> None:
    key = f"sk-e2e-{secrets.token_hex(16)}"
    env = {**state_env, "OPENAI_API_KEY": key}
    async with running_agent(env, agent_stderr, workspace) as (conn, _, client):
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        assert await ask(conn, session_id, f"my key is {key}, keep it safe") == "end_turn"
        shell = f'[[tool shell {{"command": "echo {key}"}}]]'
        assert await ask(conn, session_id, shell) == "end_turn"
        shown = json.dumps([u.model_dump(mode="json") for u in client.of(session_id)])

    assert key in shown, "the session did print the key"
    files = files_under(state_home)
    assert {path.suffix for path in files} == {".jsonl", ".json"}
    assert [path for path in files if key.encode() in path.read_bytes()] == []
    assert (
        "[redacted]" in (state_home / "acp-agent" / "sessions" / f"{session_id}.jsonl").read_text()
    )
