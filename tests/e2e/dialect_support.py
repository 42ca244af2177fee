"""One script, either ACP dialect: `acp-agent` driven in v1 by the Python SDK's client and
in v2 by the npm SDK's (`v2_client.mjs`, `V2_SCENARIO=script`), each recording every frame
that crossed the pipe; every frame checked against its dialect's schema; and what a user
saw (text, tool calls, permissions, terminals, stop reasons) read from either dialect.

A script is JSON (`Script.as_json`): the requests to send, the prompts whose turn to wait
for, the frames to wait for, and the permission answers (option kinds, in order). Strings
"$NAME.a.b" in params stand for the field a.b of the answer of the step named NAME.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.client.router import build_client_router
from acp.connection import Connection, StreamDirection, StreamEvent
from acp.stdio import spawn_stdio_connection
from e2e_support import AGENT_COMMAND, run_v2_driver
from schema_support import Dialect, Sender, assert_valid_frame
from test_e2e_tools_sdk import ToolClient  # fs on disk, terminals as real subprocesses

DIALECTS: tuple[Dialect, ...] = ("v1", "v2")
V1_CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
"""The v1 client is an editor with its own fs and terminals; v2 has neither (the agent
acts locally and streams its own terminals)."""


# --- scripts -------------------------------------------------------------------------------


@dataclass
class Script:
    """The steps both drivers run, built for one dialect (the params differ a little)."""

    dialect: Dialect
    steps: list[dict[str, Any]] = field(default_factory=list)
    permissions: list[str] = field(default_factory=list)
    """Option kinds the permission requests are answered with, in order (then allow_once;
    "cancelled" cancels the request)."""

    def request(
        self, method: str, params: dict[str, Any], name: str | None = None, *, wait: bool = True
    ) -> None:
        step = {"op": "request", "method": method, "params": params, "wait": wait}
        self.steps.append(step | ({"as": name} if name else {}))

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.steps.append({"op": "notify", "method": method, "params": params})

    def new_session(
        self, cwd: Path, name: str = "new", mcp_servers: list[dict[str, Any]] | None = None
    ) -> str:
        """`session/new`; the reference to its session id. `mcp_servers` in v1's shape (a
        stdio server without `type`; v2 always names it)."""
        servers = [self._mcp_server(server) for server in mcp_servers or []]
        self.request("session/new", {"cwd": str(cwd), "mcpServers": servers}, name)
        return f"${name}.sessionId"

    def _mcp_server(self, server: dict[str, Any]) -> dict[str, Any]:
        return {"type": "stdio", **server} if self.dialect == "v2" else server

    def reopen(self, session: str, cwd: Path, name: str = "reopened") -> None:
        """A stored session opened with its history shown again: v1 `session/load`; v2
        `session/resume` replaying from the start (v2 has no `session/load`)."""
        params = {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
        if self.dialect == "v1":
            self.request("session/load", params, name)
        else:
            self.request("session/resume", params | {"replayFrom": {"type": "start"}}, name)

    def set_config_option(self, session: str, config_id: str, value: str, name: str) -> None:
        params = {"sessionId": session, "configId": config_id, "value": value}
        self.request("session/set_config_option", params | self._value_type(), name)

    def _value_type(self) -> dict[str, str]:
        return {"type": "id"} if self.dialect == "v2" else {}  # v2 names the value's type

    def turns_ended(self, session: str, count: int) -> None:
        """Wait until `count` turns of `session` ended (v1: every prompt answered; v2: the
        `count`th `idle`), for prompts sent with `wait=False`."""
        if self.dialect == "v1":
            self.settle()
        else:
            self.until_update(session, count, sessionUpdate="state_update", state="idle")

    def prompt(self, session: str, text: str, name: str, *, wait: bool = True) -> None:
        """A text prompt, waited for to the end of its turn (v1: its answer; v2: the
        `idle` after its answer at insertion), unless `wait` is false."""
        params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
        if self.dialect == "v2" and wait:
            self.steps.append({"op": "turn", "params": params, "as": name})
        else:
            self.request("session/prompt", params, name, wait=wait)

    def until(self, match: dict[str, Any], count: int = 1) -> None:
        """Wait until `count` received frames have every field of `match`."""
        self.steps.append({"op": "until", "match": match, "count": count})

    def until_update(self, session: str, count: int = 1, **update: Any) -> None:
        params = {"sessionId": session, "update": update}
        self.until({"method": "session/update", "params": params}, count)

    def settle(self) -> None:
        """Wait for every request still unanswered."""
        self.steps.append({"op": "settle"})

    def as_json(self) -> str:
        return json.dumps({"permissions": self.permissions, "steps": self.steps})


# --- the transcript ------------------------------------------------------------------------


@dataclass
class Transcript:
    """What crossed the pipe, in order: {"in": frame} (from the agent), {"out": frame}
    (from the client), and {"step": NAME, "result" | "error"} per named step's answer."""

    dialect: Dialect
    lines: list[dict[str, Any]]
    terminals: dict[str, str] = field(default_factory=dict)
    """v1: the output of each client-side terminal the agent opened, by terminal id."""

    def received(self) -> list[dict[str, Any]]:
        return [line["in"] for line in self.lines if "in" in line]

    def answer(self, name: str) -> dict[str, Any]:
        [answer] = [line for line in self.lines if line.get("step") == name]
        return answer

    def result(self, name: str) -> Any:
        answer = self.answer(name)
        assert "result" in answer, f"{name} failed: {answer}"
        return answer["result"]

    def updates(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The `session/update` payloads of `session_id` (of `kind`), in order."""
        return [
            frame["params"]["update"]
            for frame in self.received()
            if frame.get("method") == "session/update"
            and frame["params"]["sessionId"] == session_id
            and kind in (None, frame["params"]["update"]["sessionUpdate"])
        ]

    def seen(self, session_id: str) -> Seen:
        return seen_by_user(self, session_id)


# --- the drivers ---------------------------------------------------------------------------


async def run_script(
    script: Script, env: dict[str, str], stderr_path: Path, cwd: Path, hang_guard: float
) -> Transcript:
    """A fresh agent driven through `script` in its dialect; every frame schema-checked."""
    runner = run_v1 if script.dialect == "v1" else run_v2
    transcript = await asyncio.wait_for(runner(script, env, stderr_path, cwd), hang_guard)
    assert_schema_valid(transcript)
    return transcript


async def run_v2(script: Script, env: dict[str, str], stderr: Path, cwd: Path) -> Transcript:
    out = await run_v2_driver(env, stderr, cwd, "script", V2_SCRIPT=script.as_json())
    return Transcript("v2", [json.loads(line) for line in out.splitlines()])


class _V1Run:
    """The v1 side of a script: the SDK's client router (it parses what the agent asks)
    over the SDK's connection, which shows this every frame as it crosses the pipe."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.lines: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {}
        self.pending: list[asyncio.Task[None]] = []
        self.arrived = asyncio.Event()
        self.client = _ScriptedClient(script.permissions)

    def observe(self, event: StreamEvent) -> None:
        direction = "out" if event.direction == StreamDirection.OUTGOING else "in"
        self.lines.append({direction: event.message})
        self.arrived.set()

    async def named(self, conn: Connection, method: str, params: Any, name: str | None) -> None:
        try:
            answer: dict[str, Any] = {"result": await conn.send_request(method, params)}
        except RequestError as error:
            answer = {"error": {"code": error.code, "message": str(error)}}
        if name:
            self.answers[name] = answer
            self.lines.append({"step": name, **answer})

    async def until(self, match: dict[str, Any], count: int) -> None:
        while True:
            self.arrived.clear()
            if sum(matches(line["in"], match) for line in self.lines if "in" in line) >= count:
                return
            await self.arrived.wait()

    async def run(self, conn: Connection) -> None:
        initialize = {"protocolVersion": 1, "clientCapabilities": V1_CAPABILITIES}
        initialize["clientInfo"] = {"name": "v1-e2e-script", "version": "1.0.0"}
        await self.named(conn, "initialize", initialize, "initialize")
        for step in self.script.steps:
            await self.step(conn, step)
        await asyncio.gather(*self.pending)

    async def step(self, conn: Connection, step: dict[str, Any]) -> None:
        params = substitute(step.get("params", {}), self.answers)
        if step["op"] == "request":
            task = asyncio.create_task(self.named(conn, step["method"], params, step.get("as")))
            self.pending.append(task)
            if step["wait"]:
                await task
        elif step["op"] == "notify":
            await conn.send_notification(step["method"], params)
        elif step["op"] == "until":
            await self.until(substitute(step["match"], self.answers), step["count"])
        elif step["op"] == "settle":
            await asyncio.gather(*self.pending)
        else:
            raise AssertionError(f"a v1 script has no {step['op']} step")


class _ScriptedClient(ToolClient):
    """`ToolClient`, answering every session's permission requests from one queue."""

    def __init__(self, permissions: list[str]) -> None:
        super().__init__()
        self.permission_answers = deque(permissions)

    def log(self, session_id: str) -> Any:
        log = super().log(session_id)
        log.answers = self.permission_answers
        return log


async def run_v1(script: Script, env: dict[str, str], stderr: Path, cwd: Path) -> Transcript:
    run = _V1Run(script)
    try:
        with stderr.open("ab") as errors:
            async with spawn_stdio_connection(
                build_client_router(run.client, use_unstable_protocol=True),
                *AGENT_COMMAND,
                env=env,
                cwd=cwd,
                observers=[run.observe],
                stderr=errors,
            ) as (conn, _):
                await run.run(conn)
        outputs = {
            tid: t.output.decode(errors="replace") for tid, t in run.client.terminals.items()
        }
    finally:
        run.client.kill_all()
    return Transcript("v1", run.lines, outputs)


def matches(value: Any, pattern: Any) -> bool:
    """True when `value` has every field of `pattern`, recursively (as the node driver)."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            matches(value.get(key), wanted) for key, wanted in pattern.items()
        )
    return bool(value == pattern)


def substitute(value: Any, answers: dict[str, dict[str, Any]]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        name, *path = value[1:].split(".")
        node = answers.get(name, {}).get("result")
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node
    if isinstance(value, list):
        return [substitute(item, answers) for item in value]
    if isinstance(value, dict):
        return {key: substitute(item, answers) for key, item in value.items()}
    return value


# --- the schemas ---------------------------------------------------------------------------


def assert_schema_valid(transcript: Transcript) -> None:
    """Every frame, both ways, is its exact definition in its dialect's (unstable, superset)
    schema, catch-alls closed (`schema_support.assert_valid_frame`)."""
    asked: dict[tuple[str, Any], str] = {}  # (who asked, id) -> method
    for line in transcript.lines:
        for direction, frame in line.items():
            if direction not in ("in", "out"):
                continue
            sender: Sender = "agent" if direction == "in" else "client"
            if "method" in frame and "id" in frame:
                asked[(sender, frame["id"])] = frame["method"]
            asker = "client" if sender == "agent" else "agent"
            answered = None if "method" in frame else asked.get((asker, frame.get("id")))
            assert_valid_frame(transcript.dialect, frame, sender, answered)


# --- what the user saw ---------------------------------------------------------------------


@dataclass
class Seen:
    """One session as a user saw it, whichever dialect carried it."""

    text: str
    user_text: str
    """What the user's own messages said (as echoed or replayed)."""
    tool_calls: dict[str, dict[str, Any]]
    """Per tool call id, its fields after every update (title, kind, status, content...)
    and `terminals`: every terminal its content ever showed."""
    permissions: list[str]
    """The tool call ids the user was asked about, in order."""
    stop_reasons: list[str]
    """How each turn ended, in order."""
    terminals: dict[str, str]
    """The output of each terminal shown, by terminal id."""

    def tool(self, name: str) -> dict[str, Any]:
        """The one tool call of tool `name`."""
        [call] = [c for c in self.tool_calls.values() if c.get("name") == name]
        return call

    def terminal_output(self, call: dict[str, Any]) -> str:
        """The output of the terminal `call` showed."""
        [terminal] = call["terminals"]
        return self.terminals.get(terminal, "")


def seen_by_user(transcript: Transcript, session_id: str) -> Seen:
    received = transcript.received()
    updates = transcript.updates(session_id)
    v2 = transcript.dialect == "v2"
    return Seen(
        text=_text_v2(updates) if v2 else _text_v1(updates),
        user_text=_user_text(updates),
        tool_calls=_tool_calls(updates, upsert=v2),
        permissions=_permissions(received, session_id),
        stop_reasons=_stop_reasons_v2(updates) if v2 else _stop_reasons_v1(transcript, session_id),
        terminals=_terminals_v2(updates) if v2 else transcript.terminals,
    )


def _text_v1(updates: list[dict[str, Any]], kind: str = "agent_message") -> str:
    chunks = [u["content"] for u in updates if u["sessionUpdate"] == f"{kind}_chunk"]
    return "".join(c["text"] for c in chunks if c["type"] == "text")


def _text_v2(updates: list[dict[str, Any]], kind: str = "agent_message") -> str:
    """Messages by id: a whole `agent_message` replaces its content, a chunk appends."""
    messages: dict[str, list[dict[str, Any]]] = {}
    for update in updates:
        if update["sessionUpdate"] == kind:
            messages[update["messageId"]] = list(update.get("content") or [])
        elif update["sessionUpdate"] == f"{kind}_chunk":
            messages.setdefault(update["messageId"], []).append(update["content"])
    blocks = [block for content in messages.values() for block in content]
    return "".join(b["text"] for b in blocks if b["type"] == "text")


def _user_text(updates: list[dict[str, Any]]) -> str:
    """v1 replays user chunks; v2 echoes and replays `user_message` or its chunks (the
    same function reads both: a v1 chunk without an id is still a chunk)."""
    if any(u.get("messageId") for u in updates if u["sessionUpdate"].startswith("user_")):
        return _text_v2(updates, "user_message")
    return _text_v1(updates, "user_message")


def _tool_calls(updates: list[dict[str, Any]], *, upsert: bool) -> dict[str, dict[str, Any]]:
    """v1: `tool_call` then updates whose null fields change nothing; v2: upserts (null
    clears) and content chunks that append."""
    calls: dict[str, dict[str, Any]] = {}
    for update in updates:
        kind = update["sessionUpdate"]
        if kind not in ("tool_call", "tool_call_update", "tool_call_content_chunk"):
            continue
        call = calls.setdefault(update["toolCallId"], {})
        if kind == "tool_call_content_chunk":
            call.setdefault("content", []).append(update["content"])
            continue
        fields = {k: v for k, v in update.items() if k not in ("sessionUpdate", "toolCallId")}
        call.update(fields if upsert else {k: v for k, v in fields.items() if v is not None})
        shown = [c["terminalId"] for c in fields.get("content") or [] if c["type"] == "terminal"]
        terminals = call.setdefault("terminals", [])
        terminals += [terminal for terminal in shown if terminal not in terminals]
    return calls


def _permissions(received: list[dict[str, Any]], session_id: str) -> list[str]:
    asked = []
    for frame in received:
        params = frame.get("params") or {}
        if frame.get("method") != "session/request_permission":
            continue
        if params.get("sessionId") != session_id:
            continue
        # v1 asks about `toolCall`; v2 about a `subject`, here a tool call
        call = params.get("toolCall") or (params.get("subject") or {}).get("toolCall") or {}
        asked.append(call.get("toolCallId"))
    return asked


def _stop_reasons_v1(transcript: Transcript, session_id: str) -> list[str]:
    prompts = [
        line["out"]["id"]
        for line in transcript.lines
        if line.get("out", {}).get("method") == "session/prompt"
        and line["out"]["params"]["sessionId"] == session_id
    ]
    answers = {f.get("id"): f for f in transcript.received() if "method" not in f}
    return [answers[i]["result"]["stopReason"] for i in prompts if "result" in answers.get(i, {})]


def _stop_reasons_v2(updates: list[dict[str, Any]]) -> list[str]:
    return [
        u["stopReason"]
        for u in updates
        if u["sessionUpdate"] == "state_update" and u["state"] == "idle" and u.get("stopReason")
    ]


def _terminals_v2(updates: list[dict[str, Any]]) -> dict[str, str]:
    """The agent's own terminals: base64 output chunks appended per terminal."""
    output: dict[str, bytes] = {}
    for update in updates:
        if update["sessionUpdate"] == "terminal_output_chunk":
            data = base64.b64decode(update["data"])
            output[update["terminalId"]] = output.get(update["terminalId"], b"") + data
    return {terminal: data.decode(errors="replace") for terminal, data in output.items()}
