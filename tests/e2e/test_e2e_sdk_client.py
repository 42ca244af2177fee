"""The `agent-client-protocol` package's own client drives `python -m acp_agent` over stdio."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    WriteTextFileResponse,
)
from e2e_support import (
    AGENT_COMMAND,
    API_KEY,
    HELLO_TEXT,
    MODEL,
    checked_agent_process,
    children_of,
    is_alive,
    needs_proc,
    processes_with_env,
)
from fake_llm import FakeLLM, fake_reply

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HANG_GUARD = 10.0
"""Seconds a test waits before it calls a hang a failure (the slow replies it cancels would
stream for longer)."""
SLOW_WORDS = "one two three four five six seven eight nine ten"


class RecordingClient:
    """An editor stand-in: records updates, serves fs from disk, approves once."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.reads: list[tuple[str, int | None, int | None]] = []
        self.writes: list[tuple[str, str]] = []
        self.permission_requests: list[ToolCallUpdate] = []
        self.stall: str | None = None
        """A method ("request_permission", "read_text_file") that waits for `release`."""
        self.stalled = asyncio.Event()
        self.release = asyncio.Event()

    async def _maybe_stall(self, method: str) -> bool:
        if self.stall != method:
            return False
        self.stalled.set()
        await self.release.wait()
        return True

    # the ACP client methods

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call)
        if await self._maybe_stall("request_permission"):
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        for option in options:
            if option.kind == "allow_once":
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.reads.append((path, line, limit))
        if await self._maybe_stall("read_text_file"):
            raise RequestError(-32800, "request cancelled")
        try:
            text = await anyio.Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        end = None if limit is None else start + limit
        return ReadTextFileResponse(content="".join(lines[start:end]))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes.append((path, content))
        await anyio.Path(path).write_text(content, encoding="utf-8")
        return WriteTextFileResponse()

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/kill")

    # what the tests read

    def of(self, session_id: str) -> list[Any]:
        return [update for sid, update in self.updates if sid == session_id]

    def chunks(self, session_id: str) -> list[str]:
        return [
            u.content.text
            for u in self.of(session_id)
            if isinstance(u, AgentMessageChunk) and u.content.type == "text"
        ]

    def text(self, session_id: str) -> str:
        return "".join(self.chunks(session_id))

    async def wait_until(self, condition: Callable[[], Any], seconds: float = HANG_GUARD) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; updates so far: {self.updates!r}")
            await asyncio.sleep(0.002)


@asynccontextmanager
async def running_agent(
    env: dict[str, str], stderr_path: Path, cwd: Path, client: RecordingClient | None = None
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process, RecordingClient]]:
    """The agent process, initialized by the SDK client with fs support and no terminal."""
    client = client or RecordingClient()
    with stderr_path.open("ab") as stderr:
        async with checked_agent_process(
            client,
            *AGENT_COMMAND,
            env=env,
            cwd=cwd,
            transport_kwargs={"stderr": stderr},
        ) as (conn, process):
            response = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=1,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                        terminal=False,
                    ),
                    client_info=Implementation(name="e2e-sdk-client", version="0.0.0"),
                ),
                timeout=10,
            )
            assert response.protocol_version == 1
            yield conn, process, client


def prompt(text: str) -> list[Any]:
    return [text_block(text)]


async def test_a_prompt_streams_the_model_reply_and_ends_the_turn(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=prompt("hello there")), 10
        )

    assert result.stop_reason == "end_turn"
    assert client.text(session.session_id) == fake_reply("hello there")
    assert len(client.chunks(session.session_id)) > 1, "the reply should arrive in pieces"
    [exchange] = fake_llm.exchanges
    assert exchange.headers["authorization"] == f"Bearer {API_KEY}"
    body = exchange.body
    assert body["model"] == MODEL
    assert body["stream"] is True
    system, user = body["messages"]
    assert system["role"] == "system"
    assert str(workspace) in system["content"]
    assert user == {"role": "user", "content": "hello there"}
    assert "read_file" in [tool["function"]["name"] for tool in body["tools"]]


async def test_a_read_file_tool_call_goes_through_the_client_and_its_result_reaches_the_model(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    hello = workspace / "hello.txt"
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await asyncio.wait_for(
            conn.prompt(
                session_id=session.session_id,
                prompt=prompt('[[tool read_file {"path": "hello.txt"}]]'),
            ),
            10,
        )

    assert result.stop_reason == "end_turn"
    assert [path for path, _, _ in client.reads] == [str(hello)]
    assert client.permission_requests == [], "reading inside the cwd needs no permission"
    updates = client.of(session.session_id)
    [start] = [u for u in updates if isinstance(u, ToolCallStart)]
    assert start.kind == "read"
    progress = [u for u in updates if isinstance(u, ToolCallProgress)]
    assert all(u.tool_call_id == start.tool_call_id for u in progress)
    assert progress[-1].status == "completed"
    assert "Hello from the e2e workspace!" in client.text(session.session_id)

    _, second = fake_llm.requests
    [call] = second["messages"][-2]["tool_calls"]
    assert call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == {"path": "hello.txt"}
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == call["id"]
    assert all(line in str(tool_message["content"]) for line in HELLO_TEXT.splitlines())


async def test_cancel_returns_cancelled_aborts_the_http_stream_and_keeps_the_session(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        # One word a second: the whole reply would stream for about 14 s.
        running = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=prompt(f"[[slow 1]] count {SLOW_WORDS}"))
        )
        await client.wait_until(lambda: client.chunks(sid))
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(running, HANG_GUARD)

        assert result.stop_reason == "cancelled"
        assert "ten" not in client.text(sid), "the reply was cut short"
        # The stream would run on past this wait: a hang-up seen within it was the agent's.
        aborted = fake_llm.wait_for_disconnect(timeout=HANG_GUARD)
        assert aborted is not None, "the agent kept reading the model's stream after cancel"

        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("go on")), 10)
        assert again.stop_reason == "end_turn"
        assert client.text(sid).endswith(fake_reply("go on"))
    assert [e.status for e in fake_llm.exchanges] == [200, 200]


@pytest.mark.parametrize(
    ("stall", "path"),
    [
        pytest.param("request_permission", "outside", id="permission-pending"),
        pytest.param("read_text_file", "hello.txt", id="fs-read-pending"),
    ],
)
async def test_cancel_while_the_client_is_asked_returns_cancelled_without_waiting_for_it(
    fake_llm: FakeLLM,
    agent_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
    stall: str,
    path: str,
) -> None:
    if path == "outside":  # reading outside the session roots asks for permission first
        outside = workspace.parent / "outside.txt"
        outside.write_text("elsewhere\n", encoding="utf-8")
        path = str(outside)
    client = RecordingClient()
    client.stall = stall
    async with running_agent(agent_env, agent_stderr, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        call = json.dumps({"path": path})
        running = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=prompt(f"[[tool read_file {call}]]"))
        )
        await asyncio.wait_for(client.stalled.wait(), HANG_GUARD)
        await conn.cancel(session_id=sid)
        # The client answers only after the prompt did: the prompt cannot have waited for it.
        result = await asyncio.wait_for(running, HANG_GUARD)
        client.release.set()  # the late answer an ACP client sends must not disturb the agent
        client.stall = None

        assert result.stop_reason == "cancelled"
        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("go on")), 10)
        assert again.stop_reason == "end_turn"
    if stall == "read_text_file":  # the tool call ran: its end is reported
        [start] = [u for u in client.of(sid) if isinstance(u, ToolCallStart)]
        statuses = [
            u.status
            for u in client.of(sid)
            if isinstance(u, ToolCallProgress) and u.tool_call_id == start.tool_call_id
        ]
        assert statuses[-1] == "failed"
    *_, last = fake_llm.requests
    cancelled_call, cancelled_result = last["messages"][-3:-1]
    assert cancelled_call["tool_calls"][0]["function"]["name"] == "read_file"
    assert cancelled_result["role"] == "tool"
    assert cancelled_result["tool_call_id"] == cancelled_call["tool_calls"][0]["id"]


async def test_a_permission_request_answered_cancelled_without_session_cancel_keeps_the_agent(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    outside = workspace.parent / "outside.txt"
    outside.write_text("elsewhere\n", encoding="utf-8")
    client = RecordingClient()
    client.stall = "request_permission"
    client.release.set()  # answers at once, with outcome "cancelled" (a dismissed dialog)
    async with running_agent(agent_env, agent_stderr, workspace, client) as (conn, process, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        call = json.dumps({"path": str(outside)})
        result = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=prompt(f"[[tool read_file {call}]]")), 10
        )
        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("go on")), 10)
        assert process.returncode is None

    assert result.stop_reason == "cancelled"
    assert again.stop_reason == "end_turn"
    [start] = [u for u in client.of(sid) if isinstance(u, ToolCallStart)]
    statuses = [
        u.status
        for u in client.of(sid)
        if isinstance(u, ToolCallProgress) and u.tool_call_id == start.tool_call_id
    ]
    assert statuses[-1] == "failed"
    assert client.reads == [], "a dismissed permission must not run the tool"


async def test_a_rejected_api_key_fails_the_prompt_naming_the_variable_not_the_key(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, _client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        with pytest.raises(RequestError) as failure:
            await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=prompt("[[status 401]] hi")), 10
            )

    error = failure.value
    assert error.code == -32000, "missing or rejected credentials answer auth_required"
    assert "OPENAI_API_KEY" in str(error)
    assert API_KEY not in str(error) + json.dumps(error.data)
    [exchange] = fake_llm.exchanges
    assert exchange.status == 401


@pytest.mark.parametrize(
    ("directive", "expected"),
    [
        # retry-after 0 keeps the agent's retries short (it waits its minimum instead)
        pytest.param(
            "[[status 500]] [[retry-after 0]]", r"500.*server had an error", id="server-error"
        ),
        pytest.param("[[status 429]] [[retry-after 0]]", r"429.*rate limit", id="rate-limited"),
        # A stream that keeps dropping: test_e2e_recovery.py (it is retried first).
    ],
)
async def test_a_provider_failure_fails_the_prompt_and_the_session_stays_usable(
    fake_llm: FakeLLM,
    agent_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
    directive: str,
    expected: str,
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        with pytest.raises(RequestError) as failure:
            await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=prompt(f"{directive} tell me")), 10
            )
        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("retry")), 10)

    message = str(failure.value)
    assert failure.value.code == -32603
    assert re.search(expected, message, re.IGNORECASE), message
    assert "Traceback" not in message
    assert again.stop_reason == "end_turn"
    assert client.text(sid).endswith(fake_reply("retry"))
    assert [e.status for e in fake_llm.exchanges][-1] == 200


async def test_a_transient_server_error_is_retried_and_the_prompt_succeeds(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await asyncio.wait_for(
            conn.prompt(
                session_id=session.session_id,
                prompt=prompt("[[status 500 1]] [[retry-after 0]] hello"),
            ),
            10,
        )

    assert result.stop_reason == "end_turn"
    assert client.text(session.session_id).endswith(fake_reply("hello"))
    assert [e.status for e in fake_llm.exchanges] == [500, 200]
    failed, retried = fake_llm.requests
    assert failed == retried, "a retry sends the same request again"


async def test_a_reply_cut_by_the_token_limit_ends_with_max_tokens(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=prompt("[[length]] a long story")),
            10,
        )

    assert result.stop_reason == "max_tokens"
    assert client.text(session.session_id) == fake_reply("a long story")


async def test_two_sessions_prompt_concurrently_in_one_process(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    other = workspace.parent / "other"
    other.mkdir()
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        first = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        second = await conn.new_session(cwd=str(other), mcp_servers=[])
        results = await asyncio.wait_for(
            asyncio.gather(
                conn.prompt(session_id=first.session_id, prompt=prompt("[[slow 0.1]] first")),
                conn.prompt(session_id=second.session_id, prompt=prompt("[[slow 0.1]] second")),
            ),
            10,
        )

    assert [r.stop_reason for r in results] == ["end_turn", "end_turn"]
    assert client.text(first.session_id) == fake_reply("first")
    assert client.text(second.session_id) == fake_reply("second")
    one, two = fake_llm.exchanges
    assert one.ended is not None and two.ended is not None
    assert two.started < one.ended and one.started < two.ended, "the model calls did not overlap"
    systems = sorted(e.body["messages"][0]["content"] for e in fake_llm.exchanges)
    assert any(str(other) in s for s in systems) and any(str(workspace) in s for s in systems)


@needs_proc
async def test_closing_stdin_ends_the_agent_with_exit_code_0_and_no_leftover_processes(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, process, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        # One model call first, so an HTTP client with a kept-alive connection exists.
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=prompt("hi")), 10)
        children = children_of(process.pid)
        assert process.stdin is not None
        process.stdin.close()
        # It exits on its own: nothing here sends a signal.
        code = await asyncio.wait_for(process.wait(), HANG_GUARD)

    assert code == 0
    assert not [pid for pid in children if is_alive(pid)]
    assert processes_with_env("OPENAI_BASE_URL", fake_llm.base_url) == []
    log = await anyio.Path(agent_stderr).read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log
