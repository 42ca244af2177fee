"""Built-in tools over the real protocol: the `agent-client-protocol` package's own client
drives `python -m acp_agent`, the fake LLM scripts the tool calls (`[[tool NAME {json}]]`).

The client below is an editor stand-in: `fs/*` on the real disk, `terminal/*` with real
subprocesses, scripted permission answers, and a record of every call the agent made.
Starting the agent costs about two seconds, so one agent process serves the whole module
(each test opens its own session in its own workspace); clients with other capabilities
get their own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import secrets
import signal
import subprocess
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from acp import RequestError, text_block
from acp.connection import StreamDirection, StreamEvent, StreamObserver
from acp.schema import (
    AgentPlanUpdate,
    AllowedOutcome,
    ClientCapabilities,
    ConfigOptionUpdate,
    CreateTerminalResponse,
    CurrentModeUpdate,
    DeniedOutcome,
    EnvVariable,
    FileSystemCapabilities,
    Implementation,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from e2e_support import (
    AGENT_COMMAND,
    API_KEY,
    HELLO_TEXT,
    MODEL,
    checked_agent_process,
    is_alive,
    needs_proc,
    tool,
)
from fake_llm import FakeLLM, message_text

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

PROMPT_TIMEOUT = 15.0
HANG_GUARD = 10.0
"""Seconds a test waits before it calls a hang a failure; the commands it stops run for 60."""
REJECTED = "The user rejected this tool call."


# --- the client --------------------------------------------------------------------------


@dataclass
class ClientTerminal:
    """A `terminal/create` command as a real subprocess, output kept up to the byte limit."""

    process: asyncio.subprocess.Process
    limit: int | None
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.output += chunk
            if self.limit is not None and len(self.output) > self.limit:
                del self.output[: len(self.output) - self.limit]  # keeps the end, as specified
                self.truncated = True

    def exit_status(self) -> tuple[int | None, str | None]:
        code = self.process.returncode
        if code is None:
            return None, None
        if code < 0:
            return None, signal.Signals(-code).name
        return code, None

    def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)


@dataclass
class SessionLog:
    """What the agent did to one session, and how the client answers it."""

    updates: list[Any] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Every fs/terminal/permission request, in arrival order: (method, params)."""
    permissions: list[tuple[ToolCallUpdate, list[PermissionOption]]] = field(default_factory=list)
    answers: deque[str] = field(default_factory=deque)
    """Scripted permission decisions, used in order; then `default_answer`."""
    default_answer: str = "allow_once"
    hold: asyncio.Event | None = None
    """When set, permission requests wait for this event, then answer as scripted."""
    held: asyncio.Event = field(default_factory=asyncio.Event)
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    """Set as a held permission request is answered (the answer is sent right after)."""
    create_gate: asyncio.Event | None = None
    """When set, `terminal/create` waits for this event (an editor slow to open a terminal)."""
    creating: asyncio.Event = field(default_factory=asyncio.Event)
    fail: str | None = None
    """A client method ("terminal/wait_for_exit") that answers with a JSON-RPC error."""

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        return [params for m, params in self.calls if m == method]

    def tool_starts(self) -> list[ToolCallStart]:
        return [u for u in self.updates if isinstance(u, ToolCallStart)]

    def progress(self, tool_call_id: str) -> list[ToolCallProgress]:
        return [
            u
            for u in self.updates
            if isinstance(u, ToolCallProgress) and u.tool_call_id == tool_call_id
        ]

    def final_status(self, tool_call_id: str) -> str | None:
        statuses = [u.status for u in self.progress(tool_call_id) if u.status is not None]
        return statuses[-1] if statuses else None

    def start_titled(self, title: str) -> ToolCallStart:
        [start] = [u for u in self.tool_starts() if u.title == title]
        return start

    def permission_titles(self) -> list[str | None]:
        return [tool_call.title for tool_call, _ in self.permissions]


class ToolClient:
    """The ACP client methods, recording per session; fs on disk, terminals as subprocesses."""

    def __init__(self) -> None:
        self.sessions: dict[str, SessionLog] = {}
        self.terminals: dict[str, ClientTerminal] = {}
        self._next_terminal = 0

    def log(self, session_id: str) -> SessionLog:
        return self.sessions.setdefault(session_id, SessionLog())

    def _record(self, session_id: str, method: str, **params: Any) -> SessionLog:
        log = self.log(session_id)
        log.calls.append((method, params))
        if log.fail == method:
            raise RequestError(-32603, f"scripted failure of {method}")
        return log

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.log(session_id).updates.append(update)

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        log = self._record(session_id, "session/request_permission", title=tool_call.title)
        log.permissions.append((tool_call, options))
        if log.hold is not None:
            log.held.set()
            await log.hold.wait()
            log.answered.set()
        answer = log.answers.popleft() if log.answers else log.default_answer
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        [option] = [o for o in options if o.kind == answer]
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self._record(session_id, "fs/read_text_file", path=path, line=line, limit=limit)
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
        self._record(session_id, "fs/write_text_file", path=path, content=content)
        await anyio.Path(path).write_text(content, encoding="utf-8")
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        params: dict[str, Any] = {
            "command": command,
            "args": args,
            "env": {v.name: v.value for v in env or []},
            "cwd": cwd,
            "outputByteLimit": output_byte_limit,
        }
        log = self._record(session_id, "terminal/create", **params)
        if log.create_gate is not None:
            log.creating.set()
            await log.create_gate.wait()
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env={**os.environ, **{v.name: v.value for v in env or []}},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        terminal = ClientTerminal(process, output_byte_limit)
        terminal.reader = asyncio.create_task(terminal.read())
        self._next_terminal += 1
        terminal_id = f"term-{self._next_terminal}"
        self.terminals[terminal_id] = terminal
        self.log(session_id).calls_of("terminal/create")[-1]["terminalId"] = terminal_id
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        self._record(session_id, "terminal/output", terminalId=terminal_id)
        terminal = self.terminals[terminal_id]
        code, sig = terminal.exit_status()
        done = terminal.process.returncode is not None
        return TerminalOutputResponse(
            output=terminal.output.decode("utf-8", errors="replace"),
            truncated=terminal.truncated,
            exit_status=TerminalExitStatus(exit_code=code, signal=sig) if done else None,
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        self._record(session_id, "terminal/wait_for_exit", terminalId=terminal_id)
        terminal = self.terminals[terminal_id]
        await terminal.process.wait()
        if terminal.reader is not None:
            await terminal.reader
        code, sig = terminal.exit_status()
        return WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        self._record(session_id, "terminal/kill", terminalId=terminal_id)
        self.terminals[terminal_id].kill()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        self._record(session_id, "terminal/release", terminalId=terminal_id)
        self.terminals[terminal_id].kill()
        return ReleaseTerminalResponse()

    def kill_all(self) -> None:
        for terminal in self.terminals.values():
            terminal.kill()


# --- running the agent -------------------------------------------------------------------


@dataclass
class Agent:
    conn: Any
    client: ToolClient
    process: asyncio.subprocess.Process
    llm: FakeLLM


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope, so the module's agent fixtures can be async


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module")
def module_env(llm: FakeLLM, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("agent-home")
    return {
        "OPENAI_API_KEY": API_KEY,
        "OPENAI_BASE_URL": llm.base_url,
        "ACP_AGENT_MODEL": MODEL,
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
    }


@asynccontextmanager
async def spawned(
    env: dict[str, str],
    llm: FakeLLM,
    stderr_path: Path,
    capabilities: ClientCapabilities,
    client_info: Implementation | None = None,
    observers: list[StreamObserver] | None = None,
) -> AsyncIterator[Agent]:
    """The agent, initialized; `observers` see every raw frame both ways."""
    client = ToolClient()
    try:
        with stderr_path.open("ab") as stderr:
            async with checked_agent_process(
                client,
                *AGENT_COMMAND,
                env=env,
                cwd=stderr_path.parent,
                transport_kwargs={"stderr": stderr},
                observers=observers,
            ) as (conn, process):
                await asyncio.wait_for(
                    conn.initialize(
                        protocol_version=1,
                        client_capabilities=capabilities,
                        client_info=client_info
                        or Implementation(name="e2e-tools-client", version="0.0.0"),
                    ),
                    10,
                )
                yield Agent(conn, client, process, llm)
    finally:
        client.kill_all()
        log = await anyio.Path(stderr_path).read_text(encoding="utf-8", errors="replace")
        if "Traceback" in log:
            print(f"--- agent stderr ({stderr_path}) ---\n{log}")


FULL_CLIENT = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


@pytest.fixture(scope="module")
async def agent(
    module_env: dict[str, str], llm: FakeLLM, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Agent]:
    """One agent process for the module, initialized by a client with fs and terminals."""
    stderr = tmp_path_factory.mktemp("agent-full") / "stderr.log"
    async with spawned(module_env, llm, stderr, FULL_CLIENT) as running:
        yield running


@dataclass
class Session:
    agent: Agent
    id: str
    cwd: Path

    @property
    def log(self) -> SessionLog:
        return self.agent.client.log(self.id)

    async def prompt(self, text: str) -> str:
        response = await asyncio.wait_for(
            self.agent.conn.prompt(session_id=self.id, prompt=[text_block(text)]), PROMPT_TIMEOUT
        )
        return str(response.stop_reason)

    async def set_mode(self, mode: str) -> None:
        await self.agent.conn.set_session_mode(session_id=self.id, mode_id=mode)

    def requests(self) -> list[dict[str, Any]]:
        """The fake LLM's requests made for this session (told apart by the cwd)."""
        marker = f"- Working directory: {self.cwd}\n"  # the system prompt's environment
        return [r for r in self.agent.llm.requests if marker in r["messages"][0]["content"]]

    def tool_results(self) -> list[str]:
        """The tool messages the model got in its latest request."""
        messages = self.requests()[-1]["messages"]
        results: list[str] = []
        for message in reversed(messages):
            if message["role"] != "tool":
                break
            results.insert(0, message_text(message))
        return results

    async def wait_until(self, condition: Callable[[], Any], seconds: float = HANG_GUARD) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; calls: {self.log.calls!r}")
            await asyncio.sleep(0.002)


async def open_session(agent: Agent, cwd: Path) -> Session:
    response = await agent.conn.new_session(cwd=str(cwd), mcp_servers=[])
    return Session(agent, response.session_id, cwd)


@pytest.fixture
async def session(agent: Agent, workspace: Path) -> Session:
    return await open_session(agent, workspace)


def rejected(results: list[str]) -> list[bool]:
    """Which tool results tell the model that the user said no."""
    return [REJECTED in result for result in results]


def dumped(update: Any) -> dict[str, Any]:
    return dict(update.model_dump(mode="json", by_alias=True, exclude_none=True))


# --- reading and writing through the client ----------------------------------------------


async def test_read_file_reads_a_page_through_fs_read_text_file_and_reports_its_location(
    session: Session,
) -> None:
    notes = session.cwd / "notes.txt"
    notes.write_text("line one\nline two\nline three\nline four\nline five\n", encoding="utf-8")

    stop = await session.prompt(tool("read_file", path="notes.txt", line=2, limit=2))

    assert stop == "end_turn"
    [read] = session.log.calls_of("fs/read_text_file")
    assert read["path"] == str(notes)
    assert read["line"] == 2
    assert read["limit"] is not None and read["limit"] >= 2
    assert session.log.permissions == [], "reading inside the cwd asks nothing"
    [start] = session.log.tool_starts()
    assert start.kind == "read"
    assert [(loc.path, loc.line) for loc in start.locations or []] == [(str(notes), 2)]
    assert session.log.final_status(start.tool_call_id) == "completed"
    [result] = session.tool_results()
    assert "line two" in result and "line three" in result
    assert "line one" not in result and "line four" not in result
    assert "line=4" in result, "the model is told where the file goes on"


async def test_write_file_of_a_new_file_goes_through_fs_write_text_file_and_shows_a_diff(
    session: Session,
) -> None:
    target = session.cwd / "src" / "new.py"
    target.parent.mkdir()
    content = "print('created')\n"

    stop = await session.prompt(tool("write_file", path="src/new.py", content=content))

    assert stop == "end_turn"
    assert session.log.calls_of("fs/write_text_file") == [{"path": str(target), "content": content}]
    assert target.read_text(encoding="utf-8") == content
    assert session.log.permission_titles() == ["Write src/new.py"]
    [start] = session.log.tool_starts()
    assert start.kind == "edit"
    assert session.log.final_status(start.tool_call_id) == "completed"
    diffs = [
        item
        for update in session.log.progress(start.tool_call_id)
        for item in update.content or []
        if item.type == "diff"
    ]
    assert len(diffs) == 1
    assert diffs[0].path == str(target)
    assert diffs[0].old_text is None, "a new file has no old text"
    assert diffs[0].new_text == content
    [result] = session.tool_results()
    assert f"Created {target}" in result


async def test_edit_file_shows_old_and_new_text_and_an_ambiguous_edit_tells_the_model_why(
    session: Session,
) -> None:
    config = session.cwd / "config.ini"
    config.write_text("[main]\nmode = slow\nlevel = 1\n", encoding="utf-8")
    twice = session.cwd / "twice.txt"
    twice.write_text("value = 1\nother\nvalue = 1\n", encoding="utf-8")

    stop = await session.prompt(
        tool("edit_file", path="config.ini", old_text="mode = slow", new_text="mode = fast")
    )
    assert stop == "end_turn"
    assert config.read_text(encoding="utf-8") == "[main]\nmode = fast\nlevel = 1\n"
    [start] = session.log.tool_starts()
    assert start.kind == "edit"
    assert session.log.permission_titles() == ["Edit config.ini"]
    [diff] = [
        item
        for update in session.log.progress(start.tool_call_id)
        for item in update.content or []
        if item.type == "diff"
    ]
    assert diff.path == str(config)
    assert diff.old_text == "[main]\nmode = slow\nlevel = 1\n"
    assert diff.new_text == "[main]\nmode = fast\nlevel = 1\n"

    stop = await session.prompt(
        tool("edit_file", path="twice.txt", old_text="value = 1", new_text="value = 2")
    )
    assert stop == "end_turn"
    assert twice.read_text(encoding="utf-8") == "value = 1\nother\nvalue = 1\n"
    assert [c["path"] for c in session.log.calls_of("fs/write_text_file")] == [str(config)]
    ambiguous = session.log.tool_starts()[-1]
    assert session.log.final_status(ambiguous.tool_call_id) == "failed"
    [result] = session.tool_results()
    assert "matches 2 places" in result and "lines 1, 3" in result
    assert "replace_all" in result, "the model is told how to make the edit unique"


# --- shell through client terminals ------------------------------------------------------


async def test_shell_runs_bash_c_in_a_client_terminal_and_the_model_gets_output_and_exit_code(
    session: Session,
) -> None:
    ok = "echo out-$((6*7)) && pwd"
    failing = "echo boom >&2; exit 3"

    stop = await session.prompt(tool("shell", command=ok) + tool("shell", command=failing))

    assert stop == "end_turn"
    assert session.log.permission_titles() == [ok, failing], "the title is the exact command"
    creates = session.log.calls_of("terminal/create")
    assert [(c["command"], c["args"], c["cwd"]) for c in creates] == [
        ("bash", ["-c", ok], str(session.cwd)),
        ("bash", ["-c", failing], str(session.cwd)),
    ]
    assert all(isinstance(c["outputByteLimit"], int) and c["outputByteLimit"] > 0 for c in creates)
    released = [c["terminalId"] for c in session.log.calls_of("terminal/release")]
    assert released == [c["terminalId"] for c in creates], "every terminal is released"
    for start in session.log.tool_starts():
        assert start.kind == "execute"
        shown = [
            dumped(item)
            for update in session.log.progress(start.tool_call_id)
            for item in update.content or []
        ]
        assert {"type": "terminal", "terminalId": shown[0]["terminalId"]} in shown
        assert shown[0]["terminalId"] in released
    ok_start, failing_start = session.log.tool_starts()
    assert session.log.final_status(ok_start.tool_call_id) == "completed"
    # A non-zero exit fails the call on screen, with its exit code; the model still gets
    # the output as a normal result.
    assert session.log.final_status(failing_start.tool_call_id) == "failed"
    ended = session.log.progress(failing_start.tool_call_id)[-1]
    assert ended.raw_output == {
        "exit_code": 3,
        "signal": None,
        "timed_out": False,
        "output_truncated": False,
    }
    assert [dumped(item) for item in ended.content or []][-1] == {
        "type": "content",
        "content": {"type": "text", "text": "Exited with code 3."},
    }
    first, second = session.tool_results()
    assert "out-42" in first and str(session.cwd) in first and "[exit code 0]" in first
    assert "boom" in second and "[exit code 3]" in second


async def test_a_shell_timeout_kills_and_releases_the_terminal_and_tells_the_model(
    session: Session,
) -> None:
    started = time.monotonic()
    stop = await session.prompt(tool("shell", command="sleep 60", timeout_seconds=0.5))
    took = time.monotonic() - started

    assert stop == "end_turn"
    assert took < HANG_GUARD, f"the timed-out 60 s command held the turn for {took:.1f} s"
    [create] = session.log.calls_of("terminal/create")
    methods = session.log.methods()
    assert "terminal/kill" in methods and "terminal/release" in methods
    assert methods.index("terminal/kill") < methods.index("terminal/release")
    [killed] = session.log.calls_of("terminal/kill")
    [released] = session.log.calls_of("terminal/release")
    assert killed["terminalId"] == released["terminalId"]
    assert session.agent.client.terminals[killed["terminalId"]].process.returncode is not None
    assert create["args"] == ["-c", "sleep 60"]
    [result] = session.tool_results()
    assert "timed out after 0.5 s" in result


async def test_a_failing_client_terminal_is_still_released_and_the_model_told(
    session: Session,
) -> None:
    session.log.fail = "terminal/wait_for_exit"

    assert await session.prompt(tool("shell", command="sleep 20")) == "end_turn"
    [create] = session.log.calls_of("terminal/create")
    [released] = session.log.calls_of("terminal/release")
    assert released["terminalId"] == create["terminalId"]
    terminal = session.agent.client.terminals[create["terminalId"]]
    await asyncio.wait_for(terminal.process.wait(), 2)
    [start] = session.log.tool_starts()
    assert session.log.final_status(start.tool_call_id) == "failed"
    [result] = session.tool_results()
    assert "scripted failure of terminal/wait_for_exit" in result


async def test_output_the_client_terminal_truncated_is_announced_to_the_model(
    session: Session,
) -> None:
    await session.set_mode("bypass")
    command = "head -c 200000 /dev/zero | tr '\\0' a; echo; echo THE-END"

    assert await session.prompt(tool("shell", command=command)) == "end_turn"
    [create] = session.log.calls_of("terminal/create")
    assert session.agent.client.terminals[create["terminalId"]].truncated
    [result] = session.tool_results()
    assert "THE-END" in result and "[exit code 0]" in result
    assert "truncated" in result
    assert len(result) < 40_000, "the model gets a bounded slice of a huge output"


async def test_cancel_during_a_running_shell_kills_and_releases_it_and_does_not_wait_for_it(
    session: Session,
) -> None:
    await session.set_mode("bypass")
    running = asyncio.create_task(session.prompt(tool("shell", command="sleep 60")))
    await session.wait_until(lambda: session.log.calls_of("terminal/wait_for_exit"))

    await session.agent.conn.cancel(session_id=session.id)
    stop = await asyncio.wait_for(running, HANG_GUARD)  # well before the 60 s command ends

    assert stop == "cancelled"
    [create] = session.log.calls_of("terminal/create")
    methods = session.log.methods()
    assert "terminal/kill" in methods and "terminal/release" in methods
    assert methods.index("terminal/kill") < methods.index("terminal/release")
    [released] = session.log.calls_of("terminal/release")
    terminal = session.agent.client.terminals[released["terminalId"]]
    await asyncio.wait_for(terminal.process.wait(), HANG_GUARD)
    assert create["args"] == ["-c", "sleep 60"]
    [start] = session.log.tool_starts()
    await session.wait_until(lambda: session.log.final_status(start.tool_call_id) == "failed")

    assert await session.prompt("go on") == "end_turn"
    messages = session.requests()[-1]["messages"]
    call, result = messages[-3:-1]
    assert call["tool_calls"][0]["function"]["name"] == "shell"
    assert result["role"] == "tool" and result["tool_call_id"] == call["tool_calls"][0]["id"]


async def test_cancel_while_the_client_opens_the_terminal_answers_without_it_and_cleans_up(
    session: Session,
) -> None:
    await session.set_mode("bypass")
    session.log.create_gate = asyncio.Event()
    running = asyncio.create_task(session.prompt(tool("shell", command="sleep 60")))
    await asyncio.wait_for(session.log.creating.wait(), HANG_GUARD)

    await session.agent.conn.cancel(session_id=session.id)
    # The terminal opens only after the answer: the answer cannot have waited for it.
    stop = await asyncio.wait_for(running, HANG_GUARD)
    session.log.create_gate.set()

    assert stop == "cancelled"
    # The terminal the client opens after all must still be killed and released.
    await session.wait_until(lambda: session.log.calls_of("terminal/release"), HANG_GUARD)
    [create] = session.log.calls_of("terminal/create")
    [released] = session.log.calls_of("terminal/release")
    assert released["terminalId"] == create["terminalId"]
    terminal = session.agent.client.terminals[released["terminalId"]]
    await asyncio.wait_for(terminal.process.wait(), HANG_GUARD)


async def test_cancel_with_a_permission_pending_answers_without_it_and_a_late_allow_runs_nothing(
    session: Session,
) -> None:
    session.log.hold = asyncio.Event()
    running = asyncio.create_task(session.prompt(tool("shell", command="echo never")))
    await asyncio.wait_for(session.log.held.wait(), HANG_GUARD)

    await session.agent.conn.cancel(session_id=session.id)
    # The question is answered only after the prompt: the prompt cannot have waited for it.
    stop = await asyncio.wait_for(running, HANG_GUARD)
    session.log.hold.set()  # then the client allows, late: that must not start the command
    await asyncio.wait_for(session.log.answered.wait(), HANG_GUARD)

    assert stop == "cancelled"
    [start] = session.log.tool_starts()
    await session.wait_until(lambda: session.log.final_status(start.tool_call_id) == "failed")
    # The late answer went out before this prompt, so the agent read it first.
    assert await session.prompt("go on") == "end_turn"
    assert session.log.methods() == ["session/request_permission"], "the late allow ran it"


# --- permission answers (ask mode) -------------------------------------------------------


async def test_ask_mode_asks_for_write_edit_and_shell_but_not_for_reads(
    session: Session,
) -> None:
    command = "git status --short | head -n 5"

    stop = await session.prompt(
        tool("read_file", path="hello.txt")
        + tool("write_file", path="out.txt", content="x\n")
        + tool("edit_file", path="hello.txt", old_text="Second line.", new_text="2nd line.")
        + tool("shell", command=command)
    )

    assert stop == "end_turn"
    assert session.log.permission_titles() == [
        "Write out.txt",
        "Edit hello.txt",
        command,
    ]
    kinds = [tool_call.kind for tool_call, _ in session.log.permissions]
    assert kinds == ["edit", "edit", "execute"]
    for tool_call, options in session.log.permissions:
        assert tool_call.raw_input, "the question shows the call's arguments"
        assert {o.kind for o in options} >= {"allow_once", "reject_once"}


async def test_allow_always_for_git_status_is_remembered_but_does_not_allow_git_push(
    session: Session,
) -> None:
    session.log.answers.extend(["allow_always", "reject_once"])

    assert await session.prompt(tool("shell", command="git status")) == "end_turn"
    [(_, options)] = session.log.permissions
    [always] = [o for o in options if o.kind == "allow_always"]
    assert "git status" in always.name and "push" not in always.name

    assert await session.prompt(tool("shell", command="git status --short")) == "end_turn"
    assert len(session.log.permissions) == 1, "`git status --short` is covered by the answer"
    assert [c["args"] for c in session.log.calls_of("terminal/create")] == [
        ["-c", "git status"],
        ["-c", "git status --short"],
    ]

    assert await session.prompt(tool("shell", command="git push")) == "end_turn"
    assert session.log.permission_titles()[1:] == ["git push"], "`git push` must ask again"
    assert len(session.log.calls_of("terminal/create")) == 2, "the rejected push never ran"
    assert rejected(session.tool_results()) == [True]


async def test_allow_always_for_write_file_covers_writes_in_the_cwd_but_not_other_tools(
    session: Session,
) -> None:
    session.log.answers.extend(["allow_always", "reject_once"])

    assert await session.prompt(tool("write_file", path="a.txt", content="a\n")) == "end_turn"
    assert await session.prompt(tool("write_file", path="b.txt", content="b\n")) == "end_turn"
    assert len(session.log.permissions) == 1
    assert (session.cwd / "b.txt").read_text(encoding="utf-8") == "b\n"
    edit = tool("edit_file", path="a.txt", old_text="a", new_text="z")
    assert await session.prompt(edit) == "end_turn"
    assert session.log.permission_titles()[1:] == ["Edit a.txt"]
    assert (session.cwd / "a.txt").read_text(encoding="utf-8") == "a\n"


async def test_reject_once_asks_again_and_reject_always_refuses_later_calls_without_asking(
    session: Session,
) -> None:
    session.log.answers.extend(["reject_once", "reject_always"])
    target = session.cwd / "kept-out.txt"
    write = tool("write_file", path="kept-out.txt", content="no\n")

    assert await session.prompt(write) == "end_turn"
    assert rejected(session.tool_results()) == [True]
    assert await session.prompt(write) == "end_turn"
    assert rejected(session.tool_results()) == [True]
    assert len(session.log.permissions) == 2, "reject_once is not remembered"

    assert await session.prompt(write) == "end_turn"
    assert len(session.log.permissions) == 2, "reject_always is remembered"
    [result] = session.tool_results()
    assert "reject" in result.lower()
    assert not target.exists()
    assert session.log.calls_of("fs/write_text_file") == []
    for start in session.log.tool_starts():
        assert session.log.final_status(start.tool_call_id) == "failed"


async def test_a_permission_answered_cancelled_ends_the_prompt_cancelled_without_running(
    session: Session,
) -> None:
    session.log.answers.append("cancelled")

    assert await session.prompt(tool("shell", command="echo never")) == "cancelled"
    assert session.log.methods() == ["session/request_permission"]
    [start] = session.log.tool_starts()
    assert session.log.final_status(start.tool_call_id) == "failed"
    assert await session.prompt("still there?") == "end_turn"


# --- session modes -----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["set_mode", "config_option"])
async def test_accept_edits_mode_edits_inside_the_cwd_without_asking_but_asks_for_commands(
    session: Session, how: str
) -> None:
    if how == "set_mode":
        await session.set_mode("accept-edits")
        await session.wait_until(
            lambda: any(isinstance(u, ConfigOptionUpdate) for u in session.log.updates)
        )
        [update] = [u for u in session.log.updates if isinstance(u, ConfigOptionUpdate)]
        [mode] = [o for o in dumped(update)["configOptions"] if o["id"] == "mode"]
        assert mode["currentValue"] == "accept-edits"
    else:
        response = await session.agent.conn.set_config_option(
            config_id="mode", session_id=session.id, value="accept-edits"
        )
        [mode] = [o for o in dumped(response)["configOptions"] if o["id"] == "mode"]
        assert mode["currentValue"] == "accept-edits"
        await session.wait_until(
            lambda: any(isinstance(u, CurrentModeUpdate) for u in session.log.updates)
        )
        [update] = [u for u in session.log.updates if isinstance(u, CurrentModeUpdate)]
        assert update.current_mode_id == "accept-edits"

    stop = await session.prompt(
        tool("write_file", path="made.txt", content="made\n")
        + tool("edit_file", path="hello.txt", old_text="Second line.", new_text="2nd line.")
        + tool("shell", command="echo ran")
    )

    assert stop == "end_turn"
    assert session.log.permission_titles() == ["echo ran"], "only the command asks"
    assert (session.cwd / "made.txt").read_text(encoding="utf-8") == "made\n"
    assert "2nd line." in (session.cwd / "hello.txt").read_text(encoding="utf-8")
    assert "ran" in session.tool_results()[2]


async def test_read_only_mode_offers_no_write_edit_or_shell_tool_and_runs_none(
    session: Session,
) -> None:
    await session.set_mode("read-only")
    await session.wait_until(
        lambda: any(isinstance(u, ConfigOptionUpdate) for u in session.log.updates)
    )

    stop = await session.prompt(
        tool("read_file", path="hello.txt")
        + tool("write_file", path="hello.txt", content="overwritten\n")
        + tool("shell", command="touch made-by-shell")
    )

    assert stop == "end_turn"
    offered = {t["function"]["name"] for t in session.requests()[0]["tools"]}
    assert offered == {"read_file", "search", "job_output", "plan", "agent", "web_fetch"}
    assert session.log.permissions == []
    assert [m for m in session.log.methods() if m != "fs/read_text_file"] == []
    assert (session.cwd / "hello.txt").read_text(encoding="utf-8") == HELLO_TEXT
    assert not (session.cwd / "made-by-shell").exists()
    read, write, shell = session.tool_results()
    assert "Hello from the e2e workspace!" in read
    assert "write_file" in write and "shell" in shell


async def test_bypass_mode_asks_nothing(session: Session) -> None:
    await session.set_mode("bypass")

    stop = await session.prompt(
        tool("write_file", path="made.txt", content="made\n")
        + tool("edit_file", path="made.txt", old_text="made", new_text="edited")
        + tool("shell", command="cat made.txt")
    )

    assert stop == "end_turn"
    assert session.log.permissions == []
    assert (session.cwd / "made.txt").read_text(encoding="utf-8") == "edited\n"
    assert "edited" in session.tool_results()[2]
    for start in session.log.tool_starts():
        assert session.log.final_status(start.tool_call_id) == "completed"


# --- paths outside the session cwd -------------------------------------------------------


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "symlinked-directory"])
async def test_a_path_outside_the_cwd_is_asked_about_and_never_touched_silently(
    session: Session, how: str
) -> None:
    outside = session.cwd.parent / "outside.txt"
    outside.write_text("outside secret\n", encoding="utf-8")
    if how == "dotdot":
        path = "../outside.txt"
    elif how == "absolute":
        path = str(outside)
    elif how == "symlink":
        (session.cwd / "link.txt").symlink_to(outside)
        path = "link.txt"
    else:
        (session.cwd / "up").symlink_to(session.cwd.parent, target_is_directory=True)
        path = "up/outside.txt"
    session.log.default_answer = "reject_once"

    stop = await session.prompt(
        tool("read_file", path=path)
        + tool("write_file", path=path, content="overwritten\n")
        + tool("edit_file", path=path, old_text="secret", new_text="public")
    )

    assert stop == "end_turn"
    assert len(session.log.permissions) == 3, "each call outside the cwd asks, reads too"
    assert session.log.methods() == ["session/request_permission"] * 3
    assert rejected(session.tool_results()) == [True] * 3

    await session.set_mode("accept-edits")
    assert await session.prompt(tool("write_file", path=path, content="again\n")) == "end_turn"
    assert len(session.log.permissions) == 4, "accept-edits still asks outside the cwd"
    assert [m for m in session.log.methods() if m.startswith("fs/")] == []
    assert outside.read_text(encoding="utf-8") == "outside secret\n"


async def test_a_search_outside_the_cwd_is_asked_about_and_a_rejection_reveals_nothing(
    session: Session,
) -> None:
    (session.cwd.parent / "outside.txt").write_text("outside secret\n", encoding="utf-8")
    session.log.default_answer = "reject_once"

    assert await session.prompt(tool("search", grep="secret", path="..")) == "end_turn"
    assert session.log.permission_titles() == [f"Search grep 'secret' in {session.cwd.parent}"]
    [result] = session.tool_results()
    assert REJECTED in result and "outside secret" not in result


async def test_a_shell_cwd_outside_the_workspace_is_refused(session: Session) -> None:
    await session.set_mode("bypass")

    assert await session.prompt(tool("shell", command="pwd", cwd="..")) == "end_turn"
    assert session.log.calls_of("terminal/create") == []
    [start] = session.log.tool_starts()
    assert session.log.final_status(start.tool_call_id) == "failed"
    [result] = session.tool_results()
    assert "outside the workspace" in result


async def test_search_does_not_read_through_a_symlink_to_a_file_outside_the_cwd(
    session: Session,
) -> None:
    outside = session.cwd.parent / "outside-secret.txt"
    outside.write_text("TOKEN=outside-secret-value\n", encoding="utf-8")
    (session.cwd / "innocent.txt").symlink_to(outside)

    assert await session.prompt(tool("search", grep="TOKEN")) == "end_turn"
    [result] = session.tool_results()
    asked = len(session.log.permissions) > 0
    assert asked or "outside-secret-value" not in result, result


# --- plan and search ---------------------------------------------------------------------


async def test_the_plan_tool_sends_a_plan_update_with_every_entry(session: Session) -> None:
    entries = [
        {"content": "Read the code", "priority": "high", "status": "completed"},
        {"content": "Write the fix", "priority": "medium", "status": "in_progress"},
        {"content": "Run the tests", "priority": "low", "status": "pending"},
    ]

    assert await session.prompt(tool("plan", entries=entries)) == "end_turn"
    [plan] = [u for u in session.log.updates if isinstance(u, AgentPlanUpdate)]
    assert dumped(plan)["entries"] == entries
    assert session.log.permissions == []
    [result] = session.tool_results()
    assert "3 steps" in result


async def test_search_finds_files_and_lines_and_honours_gitignore(session: Session) -> None:
    root = session.cwd
    await anyio.run_process(["git", "init", "-q", str(root)])
    (root / ".gitignore").write_text("build/\n*.log\n", encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("import os\n\nNEEDLE = 1\n", encoding="utf-8")
    (root / "src" / "util.py").write_text("def helper():\n    pass\n", encoding="utf-8")
    (root / "build").mkdir()
    (root / "build" / "gen.py").write_text("NEEDLE = 2\n", encoding="utf-8")
    (root / "debug.log").write_text("NEEDLE in a log\n", encoding="utf-8")

    stop = await session.prompt(tool("search", grep="NEEDLE") + tool("search", glob="*.py"))

    assert stop == "end_turn"
    grep, glob = session.tool_results()
    assert "src/app.py:3: NEEDLE = 1" in grep
    assert "build" not in grep and "debug.log" not in grep
    assert "src/app.py" in glob and "src/util.py" in glob
    assert "gen.py" not in glob
    assert session.log.permissions == []


# --- clients with other capabilities -----------------------------------------------------


BARE_CLIENT = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
)


@pytest.fixture(scope="module")
async def bare_agent(
    module_env: dict[str, str], llm: FakeLLM, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Agent]:
    """An agent whose client advertised neither fs nor terminals."""
    stderr = tmp_path_factory.mktemp("agent-bare") / "stderr.log"
    async with spawned(module_env, llm, stderr, BARE_CLIENT) as running:
        yield running


async def test_without_fs_and_terminal_capabilities_tools_run_locally_and_never_call_the_client(
    bare_agent: Agent, workspace: Path
) -> None:
    session = await open_session(bare_agent, workspace)
    stop = await session.prompt(
        tool("read_file", path="hello.txt")
        + tool("write_file", path="made.txt", content="made locally\n")
        + tool("edit_file", path="hello.txt", old_text="Second line.", new_text="2nd line.")
        + tool("shell", command="echo local-$((6*7)); cat made.txt; exit 4")
    )

    assert stop == "end_turn"
    assert set(session.log.methods()) == {"session/request_permission"}
    assert bare_agent.client.terminals == {}
    assert (workspace / "made.txt").read_text(encoding="utf-8") == "made locally\n"
    assert (workspace / "hello.txt").read_text(encoding="utf-8") == (
        "Hello from the e2e workspace!\n2nd line.\n"
    )
    read, write, edit, shell = session.tool_results()
    assert "Hello from the e2e workspace!" in read
    assert "Created" in write and "Edited" in edit
    assert "local-42" in shell and "made locally" in shell and "[exit code 4]" in shell
    statuses = [session.log.final_status(s.tool_call_id) for s in session.log.tool_starts()]
    assert statuses == ["completed"] * 3 + ["failed"], "the command exited 4"


def pids_running(argv: list[str]) -> list[int]:
    """Pids of live processes with exactly this command line (Linux /proc)."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "cmdline").read_bytes() == wanted and is_alive(int(entry.name)):
                    found.append(int(entry.name))
    return found


@needs_proc
async def test_cancel_during_a_local_shell_ends_its_processes_and_does_not_wait_for_them(
    bare_agent: Agent, workspace: Path
) -> None:
    session = await open_session(bare_agent, workspace)
    await session.set_mode("bypass")
    argv = ["sleep", f"{60 + secrets.randbelow(10_000) / 10_000:.4f}"]
    running = asyncio.create_task(session.prompt(tool("shell", command=f"{' '.join(argv)} & wait")))
    await session.wait_until(lambda: pids_running(argv), HANG_GUARD)
    [pid] = pids_running(argv)

    await bare_agent.conn.cancel(session_id=session.id)
    stop = await asyncio.wait_for(running, HANG_GUARD)  # well before the 60 s command ends

    assert stop == "cancelled"
    # The shell's child too, not only the shell: it runs in the group the cancel ends.
    await session.wait_until(lambda: not is_alive(pid), HANG_GUARD)
    assert session.log.calls == []
    [start] = session.log.tool_starts()
    await session.wait_until(lambda: session.log.final_status(start.tool_call_id) == "failed")


async def test_a_client_with_terminal_output_meta_gets_the_local_shell_as_terminal_meta(
    module_env: dict[str, str], llm: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    zed_like = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
        terminal=False,
        field_meta={"terminal_output": True},
    )
    async with spawned(module_env, llm, tmp_path / "stderr.log", zed_like) as agent:
        session = await open_session(agent, workspace)
        await session.set_mode("bypass")
        stop = await session.prompt(tool("shell", command="echo meta-out; exit 2"))

    assert stop == "end_turn"
    assert not [m for m in session.log.methods() if m.startswith("terminal/")]
    metas = [(u, u.field_meta) for u in session.log.updates if getattr(u, "field_meta", None)]
    [(opened, info)] = [(u, m) for u, m in metas if "terminal_info" in m]
    assert isinstance(opened, ToolCallStart), "Zed opens a display terminal from a tool_call"
    terminal_id = info["terminal_info"]["terminal_id"]
    assert info["terminal_info"]["cwd"] == str(workspace)
    output = "".join(
        m["terminal_output"]["data"]
        for _, m in metas
        if m.get("terminal_output", {}).get("terminal_id") == terminal_id
    )
    assert "meta-out" in output
    [exited] = [m["terminal_exit"] for _, m in metas if "terminal_exit" in m]
    assert exited["terminal_id"] == terminal_id and exited["exit_code"] == 2
    [start] = [u for u in session.log.tool_starts() if u.field_meta is None]
    shown = [
        dumped(item)
        for update in session.log.progress(start.tool_call_id)
        for item in update.content or []
    ]
    assert {"type": "terminal", "terminalId": terminal_id} in shown
    [result] = session.tool_results()
    assert "meta-out" in result and "[exit code 2]" in result


# --- the tool call frames Zed gets -------------------------------------------------------


PROTOCOL_TESTS = Path(__file__).resolve().parent.parent / "protocol"
TOOL_CALL_SCHEMA = json.loads(
    (PROTOCOL_TESTS / "fixtures" / "tool-calls.schema.json").read_text("utf-8")
)


def zed_initialize() -> dict[str, Any]:
    """Zed's exact `initialize` params, as the in-process protocol tests send them."""
    spec = importlib.util.spec_from_file_location(
        "zed_fake_acp_client", PROTOCOL_TESTS / "fake_acp_client.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.ZED_INITIALIZE)


@dataclass
class RawFrames:
    """Every JSON-RPC message as it crossed the pipe, before the SDK parsed it."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, event: StreamEvent) -> None:
        mine = self.sent if event.direction == StreamDirection.OUTGOING else self.received
        mine.append(event.message)

    def tool_frames(self, session_id: str, end: int) -> dict[str, list[dict[str, Any]]]:
        """Per tool call id: its `tool_call` and `tool_call_update` updates and the
        `toolCall` of its permission request (tagged `permission`), in order, up to message
        `end`; each checked against the stable v1 schema."""
        calls: dict[str, list[dict[str, Any]]] = {}
        for message in self.received[:end]:
            params = message.get("params") or {}
            if params.get("sessionId") != session_id:
                continue
            if message.get("method") == "session/request_permission":
                schema_check("RequestPermissionRequest", params)
                call = params["toolCall"]
                calls[call["toolCallId"]].append({"permission": call})
            elif message.get("method") == "session/update":
                update = params["update"]
                kind = {"tool_call": "ToolCall", "tool_call_update": "ToolCallUpdate"}
                if update["sessionUpdate"] in kind:
                    schema_check(kind[update["sessionUpdate"]], update)
                    calls.setdefault(update["toolCallId"], []).append(update)
        return calls

    def chunk_ids(
        self, session_id: str, kind: str, start: int = 0, end: int | None = None
    ) -> list[str | None]:
        """The `messageId` of each `kind` chunk among the messages received from `start`
        to `end`."""
        return [
            m["params"]["update"].get("messageId")
            for m in self.received[start:end]
            if m.get("method") == "session/update"
            and m["params"]["sessionId"] == session_id
            and m["params"]["update"]["sessionUpdate"] == kind
        ]


def schema_check(definition: str, value: Any) -> None:
    jsonschema.validate(
        value, {"$ref": f"#/$defs/{definition}", "$defs": TOOL_CALL_SCHEMA["$defs"]}
    )


async def test_zed_sees_each_change_before_approving_it_and_the_same_call_to_its_end(
    module_env: dict[str, str], llm: FakeLLM, tmp_path: Path, workspace: Path
) -> None:
    zed = zed_initialize()
    frames = RawFrames()
    notes = workspace / "notes.txt"
    notes.write_text("alpha\nbeta\n", encoding="utf-8")
    created = workspace / "new.txt"
    command = "echo checking; exit 3"
    edit = {"path": "notes.txt", "old_text": "beta", "new_text": "gamma"}
    async with spawned(
        module_env,
        llm,
        tmp_path / "stderr.log",
        ClientCapabilities.model_validate(zed["clientCapabilities"]),
        Implementation.model_validate(zed["clientInfo"]),
        [frames],
    ) as agent:
        session = await open_session(agent, workspace)
        stop = await session.prompt(
            "[[deltas 3 thinking]]"
            + tool("edit_file", **edit)
            + tool("write_file", path="new.txt", content="new\n")
            + tool("shell", command=command)
            + tool("read_file", path="notes.txt")
        )
        live_end = len(frames.received)
        await agent.conn.load_session(cwd=str(workspace), session_id=session.id, mcp_servers=[])

    assert stop == "end_turn"
    [initialize] = [m for m in frames.sent if m.get("method") == "initialize"]
    assert initialize["params"] == zed, "exactly what Zed sends"
    edited, written, ran, read = frames.tool_frames(session.id, live_end).values()

    # The edit: the diff goes out with the call and with the question; the same call ends.
    started, asked, running, finished = edited
    diff = {"type": "diff", "path": str(notes), "oldText": "alpha\nbeta\n"}
    diff["newText"] = "alpha\ngamma\n"
    assert (started["name"], started["rawInput"]) == ("edit_file", edit)
    assert started["content"] == asked["permission"]["content"] == [diff]
    assert started["locations"] == asked["permission"]["locations"] == [{"path": str(notes)}]
    assert asked["permission"]["name"] == "edit_file"
    assert asked["permission"]["toolCallId"] == started["toolCallId"]
    assert running["status"] == "in_progress"
    assert (finished["status"], finished["content"]) == ("completed", [diff])
    assert finished["rawOutput"]["replacements"] == 1

    # A new file: a diff without old text.
    started, asked, _, finished = written
    new_file = [{"type": "diff", "path": str(created), "newText": "new\n"}]
    assert started["content"] == asked["permission"]["content"] == new_file
    assert finished["rawOutput"]["created"] is True

    # The command: shown as its command line, run in a Zed terminal, failed with its code.
    started, asked, *progress, finished = ran
    line = [{"type": "content", "content": {"type": "text", "text": f"```sh\n{command}\n```"}}]
    assert (started["name"], started["rawInput"]) == ("shell", {"command": command})
    assert started["content"] == asked["permission"]["content"] == line
    [terminal_id] = [c["terminalId"] for u in progress for c in u.get("content", [])]
    assert finished["status"] == "failed"
    assert finished["content"] == [
        {"type": "terminal", "terminalId": terminal_id},
        {"type": "content", "content": {"type": "text", "text": "Exited with code 3."}},
    ]
    assert finished["rawOutput"]["exit_code"] == 3
    assert "[exit code 3]" in session.tool_results()[2], "a normal result for the model"

    # The read: asked nothing, and its end shows what was read.
    started, finished = read[0], read[-1]
    assert (started["name"], started["rawInput"]) == ("read_file", {"path": "notes.txt"})
    text = "```notes.txt#L1-2\nalpha\ngamma\n```"
    assert finished["content"] == [{"type": "content", "content": {"type": "text", "text": text}}]
    assert finished["rawOutput"]["lines"] == 2

    # Chunks name their message, the same on replay.
    thoughts = frames.chunk_ids(session.id, "agent_thought_chunk", 0, live_end)
    replies = frames.chunk_ids(session.id, "agent_message_chunk", 0, live_end)
    # (chunks sent close together may be coalesced, and a replay sends each message whole)
    assert thoughts and len(set(thoughts)) == 1 and None not in thoughts
    assert replies and len(set(replies)) == 1 and None not in replies
    assert thoughts != replies
    assert frames.chunk_ids(session.id, "agent_thought_chunk", live_end) == thoughts[:1]
    assert frames.chunk_ids(session.id, "agent_message_chunk", live_end) == replies[:1]
