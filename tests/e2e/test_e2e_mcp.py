"""MCP servers end to end: the `agent-client-protocol` package's client drives
`python -m acp_agent`, which connects real MCP servers (tests/mcp_servers: stdio
subprocesses, and the same server over streamable HTTP and SSE from its own process); the
fake OpenAI server scripts the model's tool calls (`[[tool NAME {json}]]`).

Every agent runs with a config file (`mcp_e2e.write_config`) whose provider key lives in
`MY_VENDOR_TOKEN`, beside `OPENAI_API_KEY` in its environment: two credentials no MCP server
may see.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block
from acp.schema import (
    AcceptElicitationResponse,
    AgentMessageChunk,
    AllowedOutcome,
    AvailableCommandsUpdate,
    ClientCapabilities,
    DeniedOutcome,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    FileSystemCapabilities,
    HttpMcpServer,
    Implementation,
    McpServerStdio,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    SseMcpServer,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)
from e2e_support import AGENT_COMMAND, checked_agent_process, children_of, is_alive, needs_proc
from fake_llm import FakeLLM, message_text
from mcp_e2e import (
    MARK,
    STARTED_LINE,
    VENDOR_KEY,
    VENDOR_KEY_ENV,
    announced_stdio_entry,
    calls,
    gone,
    import_finished_line,
    new_mark,
    stdio_entry,
    stdio_table,
    tool_names,
    tool_results,
    web_entry,
    web_server,
    write_config,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HANG_GUARD = 30.0
"""Seconds before a wait is called a hang (MCP servers are Python processes: slow to start
on a busy machine)."""
BUDGET = 3.0
"""`mcp_connect_timeout` of the budget test."""
ANSWERED_LINE = "e2e client: session/new answered"


# --- the client ----------------------------------------------------------------------------


class McpClient:
    """An editor stand-in: records updates and permission questions, answers them by a
    rule, serves fs from disk, and fills elicitation forms from `form_answer`."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.elicitations: list[tuple[str, Any]] = []
        self.form_answer: dict[str, Any] = {"name": "Ada", "age": 36}

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.permission_requests.append((tool_call, options))
        for option in options:
            if option.kind == "allow_once":
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def create_elicitation(
        self, message: str, mode: Any, **kwargs: Any
    ) -> AcceptElicitationResponse:
        self.elicitations.append((message, mode))
        return AcceptElicitationResponse(action="accept", content=self.form_answer)

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        text = await anyio.Path(path).read_text(encoding="utf-8")
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        await anyio.Path(path).write_text(content, encoding="utf-8")
        return None

    # what the tests read

    def of(self, session_id: str) -> list[Any]:
        return [update for sid, update in self.updates if sid == session_id]

    def text(self, session_id: str) -> str:
        return "".join(
            u.content.text
            for u in self.of(session_id)
            if isinstance(u, AgentMessageChunk) and u.content.type == "text"
        )

    def commands(self, session_id: str) -> list[list[str]]:
        """Each `available_commands_update`'s command names, in order."""
        return [
            [c.name for c in u.available_commands]
            for u in self.of(session_id)
            if isinstance(u, AvailableCommandsUpdate)
        ]

    def tool_call(
        self, session_id: str, title: str
    ) -> tuple[ToolCallStart, list[ToolCallProgress]]:
        """The (last) tool call titled `title` and its updates."""
        [*_, start] = [
            u for u in self.of(session_id) if isinstance(u, ToolCallStart) and u.title == title
        ]
        progress = [
            u
            for u in self.of(session_id)
            if isinstance(u, ToolCallProgress) and u.tool_call_id == start.tool_call_id
        ]
        return start, progress

    async def wait_until(self, condition: Callable[[], Any], seconds: float = HANG_GUARD) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; updates so far: {self.updates!r}")
            await asyncio.sleep(0.005)


@asynccontextmanager
async def running_agent(
    env: dict[str, str],
    stderr_path: Path,
    cwd: Path,
    config: Path,
    client: McpClient | None = None,
    *,
    elicitation: bool = True,
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process, McpClient]]:
    """The agent with `config`, initialized by the SDK client (fs, no terminal, and form
    elicitation unless told otherwise)."""
    client = client or McpClient()
    capabilities = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
        terminal=False,
        elicitation=(
            ElicitationCapabilities(form=ElicitationFormCapabilities()) if elicitation else None
        ),
    )
    with stderr_path.open("ab") as stderr:
        async with checked_agent_process(
            client,
            *AGENT_COMMAND,
            "--config",
            str(config),
            env=env,
            cwd=cwd,
            transport_kwargs={"stderr": stderr},
            use_unstable_protocol=True,
        ) as (conn, process):
            response = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=1,
                    client_capabilities=capabilities,
                    client_info=Implementation(name="e2e-mcp-client", version="0.0.0"),
                ),
                HANG_GUARD,
            )
            assert response.agent_capabilities is not None
            yield conn, process, client


@pytest.fixture
def env(agent_env: dict[str, str]) -> dict[str, str]:
    """The agent's environment: OPENAI_API_KEY (from `agent_env`) and the config's key."""
    return {**agent_env, VENDOR_KEY_ENV: VENDOR_KEY}


def config_for(tmp_path: Path, fake: FakeLLM, **kwargs: Any) -> Path:
    return write_config(tmp_path / "agent.toml", fake.base_url, **kwargs)


def stdio(name: str, script: str = "everything.py", *args: str, mark: str, **env: str) -> Any:
    return McpServerStdio.model_validate(stdio_entry(name, script, *args, mark=mark, **env))


def prompt(text: str) -> list[Any]:
    return [text_block(text)]


async def run(conn: Any, session_id: str, text: str) -> str:
    result = await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=prompt(text)), HANG_GUARD
    )
    return str(result.stop_reason)


async def settled(conn: Any, client: McpClient, session_id: str) -> str:
    """`/mcp`, again until no server is connecting (a retry has ended): what it showed."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        before = len(client.text(session_id))
        await run(conn, session_id, "/mcp")
        shown = client.text(session_id)[before:]
        if "): connecting" not in shown or time.monotonic() > deadline:
            return shown


# --- servers from the request and the config -------------------------------------------------


async def test_a_session_gets_stdio_http_and_sse_servers_beside_the_configs_and_its_own_win(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(
        tmp_path,
        fake_llm,
        servers={
            "conf": stdio_table(mark=mark),
            "shared": stdio_table(mark=mark, WHO="config"),
        },
    )
    with web_server("http") as http_url, web_server("sse") as sse_url:
        servers = [
            stdio("local", mark=mark, FROM_REQUEST="yes"),
            HttpMcpServer.model_validate(web_entry("web", "http", http_url, **{"X-Team": "blue"})),
            SseMcpServer.model_validate(web_entry("feed", "sse", sse_url, **{"X-Team": "green"})),
            stdio("shared", mark=mark, WHO="session"),
        ]
        async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
            started = await conn.initialize(protocol_version=1)
            session = await asyncio.wait_for(
                conn.new_session(cwd=str(workspace), mcp_servers=servers), HANG_GUARD
            )
            sid = session.session_id
            text = calls(
                ("mcp__local__env", {"name": "FROM_REQUEST"}),
                ("mcp__web__header", {"name": "X-Team"}),
                ("mcp__feed__header", {"name": "X-Team"}),
                ("mcp__shared__env", {"name": "WHO"}),
                ("mcp__conf__echo", {"text": "from the config"}),
            )
            stop = await run(conn, sid, text)

    capabilities = started.agent_capabilities
    assert capabilities is not None and capabilities.mcp_capabilities is not None
    assert (capabilities.mcp_capabilities.http, capabilities.mcp_capabilities.sse) == (True, True)
    assert stop == "end_turn"
    first, follow_up = fake_llm.requests
    offered = tool_names(first)
    for server in ("local", "web", "feed", "shared", "conf"):
        assert f"mcp__{server}__echo" in offered, server
    assert {"read_file", "shell"} <= offered
    # Vendor-safe (OpenAI's and Anthropic's rule), also for a dotted and an over-long name.
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in offered), offered
    assert any(name.startswith("mcp__local__ns_lookup_") for name in offered)
    assert any(name.startswith("mcp__local__summarise_the_whole") for name in offered)
    assert tool_results(follow_up) == {
        "mcp__local__env": "yes",
        "mcp__web__header": "blue",
        "mcp__feed__header": "green",
        "mcp__shared__env": "session",
        "mcp__conf__echo": "from the config",
    }
    assert "failed" not in client.text(sid).lower()
    assert await gone(mark) == []


async def test_load_resume_and_fork_connect_the_servers_they_are_given(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(tmp_path, fake_llm)
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, _):
        original = await conn.new_session(cwd=str(workspace), mcp_servers=[stdio("one", mark=mark)])
        assert await run(conn, original.session_id, "first") == "end_turn"
        forked = await asyncio.wait_for(
            conn.fork_session(
                cwd=str(workspace),
                session_id=original.session_id,
                mcp_servers=[stdio("two", mark=mark)],
            ),
            HANG_GUARD,
        )
        assert await run(conn, forked.session_id, calls(("mcp__two__echo", {"text": "2"}))) == (
            "end_turn"
        )
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, _):
        await asyncio.wait_for(
            conn.load_session(
                cwd=str(workspace),
                session_id=original.session_id,
                mcp_servers=[stdio("three", mark=mark)],
            ),
            HANG_GUARD,
        )
        assert await run(conn, original.session_id, "after load") == "end_turn"
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, _):
        await asyncio.wait_for(
            conn.resume_session(
                cwd=str(workspace),
                session_id=original.session_id,
                mcp_servers=[stdio("four", mark=mark)],
            ),
            HANG_GUARD,
        )
        assert await run(conn, original.session_id, "after resume") == "end_turn"

    fork_result = fake_llm.requests[2]
    mcp = [{n for n in tool_names(body) if n.startswith("mcp__")} for body in fake_llm.requests]
    servers = [{name.split("__")[1] for name in names} for names in mcp]
    assert servers == [{"one"}, {"two"}, {"two"}, {"three"}, {"four"}]
    assert tool_results(fork_result) == {"mcp__two__echo": "2"}
    assert await gone(mark) == []


# --- failures --------------------------------------------------------------------------------


@needs_proc
async def test_a_hung_or_missing_server_delays_the_first_prompt_by_the_budget_not_session_new(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(tmp_path, fake_llm, connect_timeout=BUDGET)
    servers = [
        stdio("good", mark=mark),
        stdio("stuck", "hang.py", mark=mark),
        McpServerStdio(name="missing", command="/nonexistent/mcp-server", args=[], env=[]),
    ]
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
        # The agent is warm (a session without servers), so the time is the servers' alone.
        await conn.new_session(cwd=str(workspace), mcp_servers=[])
        began = time.monotonic()
        session = await asyncio.wait_for(
            conn.new_session(cwd=str(workspace), mcp_servers=servers), HANG_GUARD
        )
        answered = time.monotonic() - began
        sid = session.session_id
        # Sent at once: it waits for the servers still connecting, the stuck one for the budget.
        stop = await run(conn, sid, calls(("mcp__good__echo", {"text": "still works"})))
        waited = time.monotonic() - began
        reports = client.text(sid)
        await run(conn, sid, "/mcp")
        status = client.text(sid)[len(reports) :]

    assert answered < BUDGET - 0.5, f"session/new took {answered:.2f}s"
    assert BUDGET - 0.2 <= waited < BUDGET + 4.0, f"the first prompt ended after {waited:.2f}s"
    assert f"'stuck' ({servers[1].command} {' '.join(servers[1].args)})" in reports
    assert f"did not connect within {BUDGET:g}s" in reports
    assert "warming up, this may take a while" in reports, "the last stderr lines are reported"
    assert "'missing' (/nonexistent/mcp-server): cannot start" in reports
    assert "command not found" in reports
    assert "'good'" not in reports
    assert reports.count("'stuck'") == 1 and reports.count("'missing'") == 1
    assert stop == "end_turn"
    assert tool_results(fake_llm.requests[1]) == {"mcp__good__echo": "still works"}
    assert "MCP server 'good'" in status and "ready" in status
    assert "mcp__good__echo" in status
    # The prompt before `/mcp` retried the failed servers: the stuck one is at it again.
    assert "MCP server 'stuck'" in status
    assert "connecting" in status or "did not connect" in status
    assert "MCP server 'missing'" in status
    assert await gone(mark) == [], "the hung server (or the child it started) outlived the agent"


async def test_a_stdio_server_starts_while_the_mcp_sdk_imports_after_session_new_answered(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    # One file, appended to by the agent (its stderr, `-X importtime` lines included), by the
    # server's shell and by this test: its line order is the order the events happened in.
    config = config_for(tmp_path, fake_llm)
    server = McpServerStdio.model_validate(
        announced_stdio_entry("box", agent_stderr, mark=new_mark())
    )
    profiled = {**env, "PYTHONPROFILEIMPORTTIME": "1"}
    async with running_agent(profiled, agent_stderr, workspace, config) as (conn, _, _):
        session = await asyncio.wait_for(
            conn.new_session(cwd=str(workspace), mcp_servers=[server]), HANG_GUARD
        )
        async with await anyio.open_file(agent_stderr, "a", encoding="utf-8") as log:
            await log.write(f"{ANSWERED_LINE}\n")
        stop = await run(conn, session.session_id, calls(("mcp__box__echo", {"text": "hi"})))

    assert stop == "end_turn"
    assert tool_results(fake_llm.requests[-1]) == {"mcp__box__echo": "hi"}
    log_text = await anyio.Path(agent_stderr).read_text(encoding="utf-8", errors="replace")
    lines = log_text.splitlines()
    mcp_imported = import_finished_line(lines, "mcp.client.session")  # the SDK's client
    assert lines.index(ANSWERED_LINE) < mcp_imported, "session/new waited for the mcp import"
    assert lines.index(STARTED_LINE) < mcp_imported, "the server started after the mcp import"


async def test_a_failed_server_is_retried_before_the_next_prompt_and_its_tools_come_back(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    ready = tmp_path / "flaky-ready"
    config = config_for(tmp_path, fake_llm)
    flaky = stdio("flaky", "flaky.py", str(ready), mark=mark)
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[flaky])
        sid = session.session_id
        await client.wait_until(lambda: "'flaky'" in client.text(sid))
        failure = client.text(sid)
        assert await run(conn, sid, "without it") == "end_turn"
        # That prompt retried it (in vain): let the attempt end before the server can start.
        await settled(conn, client, sid)
        ready.touch()
        assert await run(conn, sid, "it is retried now") == "end_turn"
        await client.wait_until(lambda: "'flaky' is connected now" in client.text(sid))
        stop = await run(conn, sid, calls(("mcp__flaky__ping", {})))

    assert "the server closed the connection before it answered" in failure
    assert f"not ready: {ready} is missing" in failure
    assert "retried" in failure
    without, _, with_it, result = fake_llm.requests
    assert "mcp__flaky__ping" not in tool_names(without)
    assert "mcp__flaky__ping" in tool_names(with_it)
    assert stop == "end_turn"
    assert tool_results(result) == {"mcp__flaky__ping": "pong"}
    assert await gone(mark) == []


async def test_a_server_crash_mid_call_fails_the_call_and_the_next_use_revives_it(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(tmp_path, fake_llm, servers={"box": stdio_table(mark=mark)})
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        crashed = await run(conn, sid, calls(("mcp__box__crash", {})))
        _, progress = client.tool_call(sid, "box: crash")
        await client.wait_until(lambda: "'box'" in client.text(sid))
        report = client.text(sid)
        # The next prompt retries it; its tools come back once it is connected.
        assert await run(conn, sid, "go on") == "end_turn"
        await client.wait_until(lambda: "'box' is connected now" in client.text(sid))
        again = await run(conn, sid, calls(("mcp__box__echo", {"text": "back"})))

    assert crashed == "end_turn"
    assert progress[-1].status == "failed"
    [shown] = progress[-1].content or []
    assert "closed the connection during the call" in shown.content.text
    assert "about to crash: goodbye" in shown.content.text
    assert "MCP server 'box'" in report and "the server closed the connection" in report
    _, crash_result, _, _, echo_result = fake_llm.requests
    assert "about to crash: goodbye" in tool_results(crash_result)["mcp__box__crash"]
    assert again == "end_turn"
    assert tool_results(echo_result) == {"mcp__box__echo": "back"}
    assert await gone(mark) == []


async def test_a_tool_list_change_reaches_the_model_in_the_same_turn(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(tmp_path, fake_llm, servers={"box": stdio_table(mark=mark)})
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        stop = await run(conn, session.session_id, calls(("mcp__box__grow", {})))
        grown = await run(conn, session.session_id, calls(("mcp__box__grown", {})))

    assert (stop, grown) == ("end_turn", "end_turn")
    before, after, _, grown_result = fake_llm.requests
    assert "mcp__box__grown" not in tool_names(before)
    assert "mcp__box__grown" in tool_names(after), "the follow-up request offers the new tool"
    assert tool_results(grown_result) == {"mcp__box__grown": "grown"}


# --- tool calls --------------------------------------------------------------------------


async def test_permissions_follow_the_tools_annotations_in_each_mode(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    trusted = {**stdio_table(mark=mark), "trusted": True}  # its readOnlyHint is believed
    config = config_for(tmp_path, fake_llm, servers={"box": trusted})
    asked: dict[str, list[tuple[str, list[str]]]] = {}
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        for mode in ("ask", "accept-edits", "bypass"):
            await conn.set_session_mode(session_id=sid, mode_id=mode)
            before = len(client.permission_requests)
            text = calls(
                ("mcp__box__echo", {"text": "read only"}),
                ("mcp__box__add", {"a": 1, "b": 2}),
                ("mcp__box__wipe", {"path": "/tmp/x"}),
            )
            assert await run(conn, sid, text) == "end_turn"
            asked[mode] = [
                (str(call.title), [o.kind for o in options])
                for call, options in client.permission_requests[before:]
            ]

    every_kind = ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert asked["ask"] == [
        ("box: add", every_kind),
        ("box: wipe", ["allow_once", "reject_once"]),
    ]
    assert asked["accept-edits"] == [
        ("box: add", every_kind),
        ("box: wipe", ["allow_once", "reject_once"]),
    ]
    assert asked["bypass"] == []


async def test_a_tool_call_shows_server_tool_input_progress_and_cancel_reaches_the_server(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(tmp_path, fake_llm, servers={"box": stdio_table(mark=mark)})
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="bypass")
        running = asyncio.ensure_future(
            conn.prompt(session_id=sid, prompt=prompt(calls(("mcp__box__slow", {})))),
        )

        def progressed() -> bool:
            return any(isinstance(u, ToolCallProgress) and u.content for u in client.of(sid))

        await client.wait_until(progressed)
        began = time.monotonic()
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(running, HANG_GUARD)
        took = time.monotonic() - began
        start, progress = client.tool_call(sid, "box: slow")
        after = await run(conn, sid, calls(("mcp__box__was_cancelled", {})))

    assert result.stop_reason == "cancelled"
    assert took < 2.0, f"cancel took {took:.2f}s"
    assert start.raw_input == {}
    assert start.kind == "other"
    texts = [item.content.text for u in progress for item in u.content or []]
    assert "warming up (1/10)" in texts
    assert after == "end_turn"
    assert tool_results(fake_llm.requests[-1]) == {"mcp__box__was_cancelled": "cancelled"}


async def test_results_reach_the_model_and_the_editor_and_is_error_fails_the_call(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    trusted = {**stdio_table(mark=mark), "trusted": True}  # echo's kind is `read`
    config = config_for(tmp_path, fake_llm, servers={"box": trusted})
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="bypass")
        text = calls(
            ("mcp__box__echo", {"text": "plain"}),
            ("mcp__box__mixed", {}),
            ("mcp__box__add", {"a": 2, "b": 3}),
            ("mcp__box__structured_only", {}),
            ("mcp__box__fail", {"reason": "testing"}),
        )
        stop = await run(conn, sid, text)
        shown = {
            title: client.tool_call(sid, title)
            for title in ("box: echo", "box: mixed", "box: add", "box: fail")
        }

    assert stop == "end_turn"
    results = tool_results(fake_llm.requests[-1])
    assert results["mcp__box__echo"] == "plain"
    mixed = results["mcp__box__mixed"]
    assert "some text" in mixed
    # Chat Completions tool messages take text only: the image follows in a user message.
    assert "[image (image/png): in the user message after the tool results]" in mixed
    images = fake_llm.requests[-1]["messages"][-1]
    assert images["role"] == "user"
    [url] = [item["image_url"]["url"] for item in images["content"] if "image_url" in item]
    assert url.startswith("data:image/png;base64,")
    assert "[resource file:///notes.txt]\nnote body" in mixed
    assert "[resource file:///data.bin (application/octet-stream), 5 bytes]" in mixed
    assert "[resource link big.log file:///big.log (text/plain): the full log]" in mixed
    assert json.loads(results["mcp__box__add"]) == {"sum": 5}
    assert json.loads(results["mcp__box__structured_only"]) == {"answer": 42}
    assert "failed on purpose: testing" in results["mcp__box__fail"]

    start, progress = shown["box: echo"]
    assert (start.kind, start.raw_input) == ("read", {"text": "plain"})
    assert progress[-1].status == "completed"
    assert [item.content.text for item in progress[-1].content or []] == ["plain"]
    _, mixed_progress = shown["box: mixed"]
    assert "note body" in mixed_progress[-1].content[0].content.text  # type: ignore[index]
    _, failed = shown["box: fail"]
    assert failed[-1].status == "failed"
    assert "failed on purpose: testing" in failed[-1].content[0].content.text  # type: ignore[index]


async def test_roots_elicitation_and_sampling_are_answered_over_the_real_protocol(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    extra = tmp_path / "extra"
    extra.mkdir()
    config = config_for(tmp_path, fake_llm, servers={"box": stdio_table(mark=mark)})
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
        session = await conn.new_session(
            cwd=str(workspace), mcp_servers=[], additional_directories=[str(extra)]
        )
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="bypass")
        text = calls(("mcp__box__roots", {}), ("mcp__box__ask", {}), ("mcp__box__sample", {}))
        stop = await run(conn, sid, text)

    assert stop == "end_turn"
    results = tool_results(fake_llm.requests[-1])
    assert results["mcp__box__roots"] == f"{workspace.as_uri()} {extra.as_uri()}"
    assert results["mcp__box__ask"] == "accept: Ada 36"
    [(message, mode)] = client.elicitations
    assert message == "box: Who are you?"
    assert mode.session_id == sid
    assert set(mode.requested_schema.properties) == {"name", "age"}
    assert results["mcp__box__sample"].startswith("declined:"), "sampling is off by default"


async def test_mcp_prompts_are_slash_commands_that_send_their_messages_to_the_model(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(tmp_path, fake_llm, servers={"box": stdio_table(mark=mark)})
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        # Typed at once: the prompt waits for the server, whose prompts come in a later update.
        greet = await run(conn, sid, "/box:greet Ada")
        review = await run(conn, sid, '/box:review "x = 1"')
        usage = await run(conn, sid, "/box:greet")
        usage_text = client.text(sid)

    *_, names = client.commands(sid)
    assert {"model", "mcp"} <= set(names) and names[-2:] == ["box:greet", "box:review"]
    *_, update = [u for u in client.of(sid) if isinstance(u, AvailableCommandsUpdate)]
    greet_command = update.available_commands[-2]
    assert greet_command.description == "Greet someone."
    assert greet_command.input is not None and greet_command.input.root.hint == "name"
    assert (greet, review, usage) == ("end_turn", "end_turn", "end_turn")
    greeted, reviewed = fake_llm.requests
    assert greeted["messages"][-1] == {"role": "user", "content": "Please greet Ada warmly."}
    assert [(m["role"], message_text(m)) for m in reviewed["messages"][-3:]] == [
        ("user", "Review this:\nx = 1"),
        ("assistant", "I will look at it."),
        ("user", "Go on."),
    ]
    assert "Usage: /box:greet <name>" in usage_text, "a missing argument shows the usage"


# --- environment, logs and the end of servers ----------------------------------------------


async def test_a_stdio_server_gets_the_requests_env_and_none_of_the_agents_credentials(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(tmp_path, fake_llm)
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, _):
        session = await conn.new_session(
            cwd=str(workspace), mcp_servers=[stdio("box", mark=mark, FROM_REQUEST="given")]
        )
        await conn.set_session_mode(session_id=session.session_id, mode_id="bypass")
        stop = await run(conn, session.session_id, calls(("mcp__box__environ", {})))

    assert stop == "end_turn"
    environ = json.loads(tool_results(fake_llm.requests[-1])["mcp__box__environ"])
    assert environ["FROM_REQUEST"] == "given"
    assert environ[MARK] == mark
    assert environ["PATH"] == env["PATH"] and environ["HOME"] == env["HOME"]
    assert "OPENAI_API_KEY" not in environ and VENDOR_KEY_ENV not in environ
    assert "OPENAI_BASE_URL" not in environ
    assert not [k for k, v in environ.items() if v in (VENDOR_KEY, env["OPENAI_API_KEY"])]
    log = await anyio.Path(agent_stderr).read_text(encoding="utf-8", errors="replace")
    assert "[box] everything server starting" in log, "the server's stderr goes to our log"


@needs_proc
async def test_session_close_ends_the_sessions_servers_and_only_them(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    closing, staying = new_mark(), new_mark()
    config = config_for(tmp_path, fake_llm)
    async with running_agent(env, agent_stderr, workspace, config) as (conn, _, _):
        first = await conn.new_session(cwd=str(workspace), mcp_servers=[stdio("a", mark=closing)])
        second = await conn.new_session(cwd=str(workspace), mcp_servers=[stdio("b", mark=staying)])
        for session in (first, second):  # the first prompt waits for the session's servers
            assert await run(conn, session.session_id, "/mcp") == "end_turn"
        assert len(await gone(closing, 0)) == 1 and len(await gone(staying, 0)) == 1
        await asyncio.wait_for(conn.close_session(session_id=first.session_id), HANG_GUARD)
        closed = await gone(closing)
        still = await gone(staying, 0)

    assert closed == []
    assert len(still) == 1
    assert await gone(staying) == []


@needs_proc
async def test_closing_stdin_ends_the_agent_and_every_server(
    fake_llm: FakeLLM, env: dict[str, str], agent_stderr: Path, workspace: Path, tmp_path: Path
) -> None:
    mark = new_mark()
    config = config_for(tmp_path, fake_llm, connect_timeout=BUDGET)
    async with running_agent(env, agent_stderr, workspace, config) as (conn, process, _):
        session = await conn.new_session(
            cwd=str(workspace), mcp_servers=[stdio("a", mark=mark), stdio("b", mark=mark)]
        )
        assert await run(conn, session.session_id, "/mcp") == "end_turn"  # waits for them
        children = children_of(process.pid)
        assert len(await gone(mark, 0)) == 2
        assert process.stdin is not None
        process.stdin.close()
        code = await asyncio.wait_for(process.wait(), HANG_GUARD)

    assert code == 0
    assert not [pid for pid in children if is_alive(pid)]
    assert await gone(mark) == []
    log = await anyio.Path(agent_stderr).read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
async def test_a_termination_signal_ends_the_agent_and_every_server_and_stdout_stays_protocol(
    fake_llm: FakeLLM,
    env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
    tmp_path: Path,
    sig: signal.Signals,
) -> None:
    mark = new_mark()
    config = config_for(
        tmp_path, fake_llm, servers={"conf": stdio_table(mark=mark)}, connect_timeout=BUDGET
    )
    servers = [stdio_entry("busy", mark=mark), stdio_entry("stuck", "hang.py", mark=mark)]
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(workspace), "mcpServers": servers},
        },
    ]
    with agent_stderr.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            *AGENT_COMMAND,
            "--config",
            str(config),
            env=env,
            cwd=workspace,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        await process.stdin.drain()
        lines: list[bytes] = []

        async def answer(request_id: int) -> dict[str, Any]:
            assert process.stdout is not None
            while True:
                lines.append(await asyncio.wait_for(process.stdout.readline(), HANG_GUARD))
                frame = json.loads(lines[-1])
                if frame.get("id") == request_id and "method" not in frame:
                    return dict(frame)

        session_id = (await answer(2))["result"]["sessionId"]
        # The first prompt waits for the servers: then the two of the request and the
        # config's are connected, and the stuck one has failed (ending with its child).
        mcp = {"sessionId": session_id, "prompt": [{"type": "text", "text": "/mcp"}]}
        wait = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": mcp}
        process.stdin.write(json.dumps(wait).encode() + b"\n")
        await process.stdin.drain()
        await answer(3)
        alive = await gone(mark, 0)
        process.send_signal(sig)
        code = await asyncio.wait_for(process.wait(), HANG_GUARD)
        lines += (await process.stdout.read()).splitlines()

    assert len(alive) >= 2
    assert code == 0
    assert await gone(mark) == []
    # Every stdout line is a frame: the servers' stderr (and ours) went elsewhere.
    frames = [json.loads(line) for line in lines if line.strip()]
    assert all(frame.get("jsonrpc") == "2.0" for frame in frames)
    log = await anyio.Path(agent_stderr).read_text(encoding="utf-8", errors="replace")
    assert "[busy] everything server starting" in log
    assert "Traceback" not in log
