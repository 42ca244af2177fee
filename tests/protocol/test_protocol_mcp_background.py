"""`session/new` (and load, resume, fork) answer at once while their MCP servers connect in
the background; the first prompt waits for them (within `mcp_connect_timeout`), a failure
is reported on it as before, the servers' prompts follow as a commands update, and a session
closed (or an agent shut down) while a server still starts leaves no process behind.

The server is `tests/mcp_servers/gated.py`: it starts only when the test opens its gate (a
FIFO), so "before the server is up" is a fact of the test, not a matter of timing. The
connect timeout is two minutes: code that waited for the server in `session/new` would miss
the answer's deadline by far.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from fake_acp_client import TIMEOUT, FakeClient

from acp_agent.protocol import schema, server

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]
GATED = Path(__file__).resolve().parent.parent / "mcp_servers" / "gated.py"
SERVER_START_SECONDS = 120.0
"""A loaded machine takes seconds to import the MCP server once the gate opens."""
CONFIG = """
default_model = "echo/echo"
mcp_connect_timeout = 120.0

[providers.echo]
type = "echo"
models = [{ id = "echo" }]
"""


class Gate:
    """The FIFO a gated server waits on before it serves, and the file it writes its pid to."""

    def __init__(self, directory: Path) -> None:
        self.fifo = directory / "gate"
        self.marker = directory / "started"
        os.mkfifo(self.fifo)
        self._writer: IO[str] | None = None

    def server(self, name: str = "gated") -> dict[str, Any]:
        """The server as an ACP `McpServerStdio` entry."""
        args = [str(GATED), str(self.marker), str(self.fifo)]
        return {"name": name, "command": sys.executable, "args": args, "env": []}

    async def wait_started(self) -> int:
        """Until the server opened its end of the gate (opening ours waits for that): its pid."""
        if self._writer is None:
            self._writer = await anyio.to_thread.run_sync(
                lambda: open(self.fifo, "w", encoding="utf-8"),  # noqa: SIM115 (held open)
                abandon_on_cancel=True,
            )
        return int(self.marker.read_text(encoding="utf-8"))

    async def release(self, line: str = "go") -> None:
        await self.wait_started()
        assert self._writer is not None
        self._writer.write(line + "\n")
        self.close()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


@pytest.fixture
def config_file(tmp_path: Path) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return str(path)


@pytest.fixture
def gate(tmp_path: Path) -> Any:
    gate = Gate(tmp_path)
    yield gate
    gate.close()


async def open_session(client: FakeClient, cwd: Path, *servers: dict[str, Any]) -> tuple[str, int]:
    """Initialize, start a session with `servers`: its id and the index of its answer."""
    await client.initialize()
    reply = await client.request("session/new", {"cwd": str(cwd), "mcpServers": list(servers)})
    assert "error" not in reply, reply
    return reply["result"]["sessionId"], client.frames.index(reply)


def reply_index(client: FakeClient, request_id: int) -> int:
    return client.index_of(lambda f: f.get("id") == request_id and "method" not in f)


def updates_of(client: FakeClient, kind: str) -> list[tuple[int, dict[str, Any]]]:
    return [
        (index, frame["params"]["update"])
        for index, frame in enumerate(client.frames)
        if frame.get("method") == "session/update"
        and frame["params"]["update"]["sessionUpdate"] == kind
    ]


def commands_of(update: dict[str, Any]) -> list[str]:
    return [command["name"] for command in update["availableCommands"]]


def ended(pid: int) -> bool:
    """No such process (any more): it ended and was reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_session_new_answers_before_its_server_is_up_and_the_first_prompt_sees_its_tools(
    connection: Connection, config_file: str, gate: Gate, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        sid, answered = await open_session(client, tmp_path, gate.server())
        first = await client.start_prompt(sid, "@tool mcp__gated__ping {}")
        await gate.release()
        reply = await client.wait_for(
            lambda f: f.get("id") == first and "method" not in f, within=SERVER_START_SECONDS
        )
        await client.wait_for(lambda f: "gated:hello" in str(f.get("params", {}).get("update", {})))

    assert reply["result"] == {"stopReason": "end_turn"}
    text = "".join(u["content"]["text"] for _, u in updates_of(client, "agent_message_chunk"))
    assert "Tool mcp__gated__ping returned:\npong" in text
    shown = updates_of(client, "available_commands_update")
    assert "gated:hello" not in commands_of(shown[0][1]), "announced before the server was up"
    later = [index for index, update in shown if "gated:hello" in commands_of(update)]
    assert later and min(later) > answered


class Logged(logging.Handler):
    """Sets `seen` when `message` is logged (at any level)."""

    def __init__(self, message: str) -> None:
        super().__init__(logging.DEBUG)
        self.message, self.seen = message, anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == self.message:
            self.seen.set()


async def test_the_schema_models_wait_until_the_servers_have_connected(
    connection: Connection,
    config_file: str,
    gate: Gate,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Their import takes half a second of CPU, which servers starting beside it would lose.
    loads, loaded = [], anyio.Event()

    def load() -> None:  # in a worker thread
        loads.append("schema")
        anyio.from_thread.run_sync(loaded.set)

    monkeypatch.setattr(schema, "load", load)
    due = Logged("the schema models load once no MCP server is still connecting")
    log = logging.getLogger(server.__name__)
    caplog.set_level(logging.DEBUG, logger=log.name)
    log.addHandler(due)
    try:
        async with connection(config_file) as client:
            sid, _ = await open_session(client, tmp_path, gate.server())
            await gate.wait_started()
            with anyio.fail_after(TIMEOUT):
                await due.seen.wait()  # the warm-up's delay has passed
            # A round trip through the agent: time for a load it did not hold back to start.
            assert "error" not in await client.request("session/list", {})
            held_back = list(loads)
            await gate.release()
            with anyio.fail_after(SERVER_START_SECONDS):
                await loaded.wait()
            reply = await client.prompt(sid, "@tool mcp__gated__ping {}")
    finally:
        log.removeHandler(due)

    assert held_back == [], "the schema models loaded while the server was starting"
    assert loads == ["schema"]
    text = "".join(u["content"]["text"] for _, u in updates_of(client, "agent_message_chunk"))
    assert reply["result"] == {"stopReason": "end_turn"}
    assert "Tool mcp__gated__ping returned:\npong" in text


@pytest.mark.parametrize("method", ["session/load", "session/resume", "session/fork"])
async def test_load_resume_and_fork_answer_before_their_server_is_up(
    connection: Connection, config_file: str, gate: Gate, tmp_path: Path, method: str
) -> None:
    async with connection(config_file) as client:
        sid, _ = await open_session(client, tmp_path)
        assert (await client.prompt(sid, "remember me"))["result"]["stopReason"] == "end_turn"
    async with connection(config_file) as client:
        await client.initialize()
        params = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": [gate.server()]}
        reply = await client.request(method, params)
        pid = await gate.wait_started()  # it was started, and is still waiting for the gate

    assert "error" not in reply, reply
    assert ended(pid), "the agent's end closed the server that was still starting"


async def test_a_server_that_fails_to_start_is_reported_on_the_first_prompt(
    connection: Connection, config_file: str, gate: Gate, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        sid, answered = await open_session(client, tmp_path, gate.server())
        first = await client.start_prompt(sid, "hello")
        await gate.release("fail")
        reply = await client.wait_for(
            lambda f: f.get("id") == first and "method" not in f, within=SERVER_START_SECONDS
        )

    assert reply["result"] == {"stopReason": "end_turn"}
    [(report_at, report)] = [
        (index, update["content"]["text"])
        for index, update in updates_of(client, "agent_message_chunk")
        if "'gated'" in update["content"]["text"]
    ]
    assert answered < report_at < reply_index(client, first)
    assert "the server closed the connection before it answered" in report
    assert "gated: the gate said fail" in report, "its last stderr lines"
    assert "it is retried before the next prompt" in report


async def test_closing_the_session_while_its_server_starts_leaves_no_process(
    connection: Connection, config_file: str, gate: Gate, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        sid, _ = await open_session(client, tmp_path, gate.server())
        pid = await gate.wait_started()
        closed = await client.request("session/close", {"sessionId": sid})
        assert "error" not in closed, closed
        assert ended(pid)
        # The agent goes on: a new session works.
        other, _ = await open_session(client, tmp_path)
        assert (await client.prompt(other, "still here"))["result"]["stopReason"] == "end_turn"


async def test_shutting_the_agent_down_while_a_server_starts_leaves_no_process(
    connection: Connection, config_file: str, gate: Gate, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        await open_session(client, tmp_path, gate.server())
        pid = await gate.wait_started()
    # The block ended the agent's input: it shut down.
    assert ended(pid)


async def test_a_cancel_of_the_first_prompt_while_its_server_connects_cancels_it_at_once(
    connection: Connection, config_file: str, gate: Gate, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        sid, _ = await open_session(client, tmp_path, gate.server())
        await gate.wait_started()
        first = await client.start_prompt(sid, "hello")
        # Answered only after the prompt's task started (tasks start in the order read): the
        # prompt is waiting for the server by now.
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "bypass"})
        await client.notify("session/cancel", {"sessionId": sid})
        with anyio.fail_after(TIMEOUT):  # far less than the connect timeout
            reply = await client.reply(first)
        await gate.release()
        second = await client.start_prompt(sid, "@tool mcp__gated__ping {}")
        second_reply = await client.wait_for(
            lambda f: f.get("id") == second and "method" not in f, within=SERVER_START_SECONDS
        )

    assert reply["result"] == {"stopReason": "cancelled"}
    assert second_reply["result"] == {"stopReason": "end_turn"}
    text = "".join(u["content"]["text"] for _, u in updates_of(client, "agent_message_chunk"))
    assert "Echo: hello" not in text, "the cancelled prompt never reached the model"
    assert "Tool mcp__gated__ping returned:\npong" in text
