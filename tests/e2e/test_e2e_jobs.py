"""Background jobs end to end: the `agent-client-protocol` package's client drives
`python -m acp_agent` (no terminals: jobs run locally), the fake LLM scripts the calls.

A job outlives its turn and is read in a later one; the model hears of its end at its next
request; `/jobs` lists it; closing the session, or the agent's stdin, ends its processes
(found by a marker in their environment)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from e2e_support import needs_proc, processes_with_env, prompt_text, sdk_agent, tool
from fake_llm import FakeLLM, message_text

pytestmark = [pytest.mark.e2e, pytest.mark.anyio, needs_proc]

HANG_GUARD = 10.0
"""Seconds a test waits before it calls a hang a failure; the jobs it stops run for 600."""
MARK = "ACP_E2E_JOB_MARK"


class Client:
    """An editor without terminals or fs: it approves every permission request once."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[str | None] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permissions.append(tool_call.title)
        for option in options:
            if option.kind == "allow_once":
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/write_text_file")

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/create")

    def text(self, session_id: str) -> str:
        return "".join(
            u.content.text
            for sid, u in self.updates
            if sid == session_id and isinstance(u, AgentMessageChunk) and u.content.type == "text"
        )


@asynccontextmanager
async def running_agent(
    env: dict[str, str], stderr_path: Path, cwd: Path
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process, Client]]:
    client = Client()
    capabilities = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
    )
    async with sdk_agent(
        client,
        env,
        stderr_path,
        cwd,
        name="e2e-jobs",
        capabilities=capabilities,
        hang_guard=HANG_GUARD,
    ) as (conn, process, _):
        yield conn, process, client


async def say(conn: Any, session_id: str, text: str) -> str:
    stop: str = (await prompt_text(conn, session_id, text, HANG_GUARD)).stop_reason
    return stop


def last_message(fake_llm: FakeLLM) -> dict[str, Any]:
    message: dict[str, Any] = fake_llm.requests[-1]["messages"][-1]
    return message


async def gone(mark: str, within: float = HANG_GUARD) -> list[int]:
    """The live processes carrying the job marker, once none are left or `within` passed."""
    deadline = time.monotonic() + within
    # Polling: another process's end is no event of ours.
    while (left := processes_with_env(MARK, mark)) and time.monotonic() < deadline:  # noqa: ASYNC110
        await anyio.sleep(0.02)
    return left


async def until(condition: Callable[[], Any], within: float = HANG_GUARD) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await anyio.sleep(0.02)


def sleeper(mark: str) -> str:
    return f"echo job-says-hi; {MARK}={mark} sleep 600"


async def test_a_job_started_in_one_turn_is_read_in_the_next_and_listed_for_the_user(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    mark = secrets.token_hex(8)
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        assert await say(conn, session, tool("shell", command=sleeper(mark), background=True)) == (
            "end_turn"
        )
        started = message_text(last_message(fake_llm))
        assert len(processes_with_env(MARK, mark)) == 1, "the job runs on after its turn"

        assert await say(conn, session, tool("job_output", job_id="job-1", wait_seconds=10)) == (
            "end_turn"
        )
        read = message_text(last_message(fake_llm))
        assert await say(conn, session, "/jobs") == "end_turn"
        listing = client.text(session)
        await conn.close_session(session_id=session)

    assert client.permissions == [sleeper(mark)], "the job asked as the command would"
    assert "Started job-1" in started
    assert read.startswith("job-says-hi\n")
    assert "job-1 still running" in read
    assert "- job-1: running, " in listing
    assert f"`{sleeper(mark)}`" in listing
    assert await gone(mark) == []


async def test_the_model_hears_of_a_job_that_ended_at_its_next_request(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await say(conn, session, tool("shell", command="echo built; exit 2", background=True))

        async def ended() -> bool:
            before = len(client.text(session))
            await say(conn, session, "/jobs")
            return "- job-1: exit 2" in client.text(session)[before:]

        deadline = time.monotonic() + HANG_GUARD
        while not await ended():
            assert time.monotonic() < deadline, "the job did not end"
        assert await say(conn, session, "what now?") == "end_turn"
        prompt = message_text(last_message(fake_llm))
        assert await say(conn, session, "and then?") == "end_turn"
        later = message_text(last_message(fake_llm))

    assert prompt.startswith("what now?")
    assert "[job job-1 (`echo built; exit 2`) ended: exit 2; job_output job-1 for its output]" in (
        prompt
    )
    assert "job-1" not in later, "told once"


async def test_closing_the_session_ends_its_jobs_processes(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    mark = secrets.token_hex(8)
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, process, _):
        session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await say(conn, session, tool("shell", command=sleeper(mark), background=True))
        await until(lambda: processes_with_env(MARK, mark))

        await asyncio.wait_for(conn.close_session(session_id=session), HANG_GUARD)
        left = await gone(mark)
        agent_alive = process.returncode is None

    assert left == []
    assert agent_alive, "the agent goes on; only the session's jobs end"


async def test_closing_stdin_ends_every_jobs_processes(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    mark = secrets.token_hex(8)
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, process, _):
        for _ in range(2):
            session = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            await say(conn, session, tool("shell", command=sleeper(mark), background=True))
        await until(lambda: len(processes_with_env(MARK, mark)) == 2)
        assert process.stdin is not None
        process.stdin.close()
        code = await asyncio.wait_for(process.wait(), HANG_GUARD)

    assert code == 0
    assert await gone(mark) == []
    log = await anyio.Path(agent_stderr).read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log
