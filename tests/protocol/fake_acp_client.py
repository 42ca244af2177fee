"""A fake ACP client for driving `protocol.server.serve` in-process over memory streams.

It records every frame the agent sends, answers the agent's requests (`fs/*` from disk,
`session/request_permission` with a configurable choice) and offers helpers to send
requests and wait for frames. Every frame the agent sends is checked against the schema of
the dialect the client asked for (`schema_problems`; `connection()` fails the test on any).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from schema_support import Dialect, frame_problem

from acp_agent.rpc.framing import StreamSource, read_lines

TIMEOUT = 10.0

ZED_CLIENT_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": True, "writeTextFile": True},
    "terminal": True,
    "auth": {"terminal": True},
    "_meta": {"terminal_output": True, "terminal-auth": True},
}
ZED_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": ZED_CLIENT_CAPABILITIES,
    "clientInfo": {"name": "zed", "version": "0.200.0", "title": "Zed"},
}
NO_FS_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
}

PermissionAnswer = dict[str, Any] | Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


class FakeClient:
    def __init__(self, to_agent: MemoryObjectSendStream[bytes], tg: TaskGroup) -> None:
        self._to_agent = to_agent
        self._tg = tg
        self._ids = itertools.count(1)
        self._changed = anyio.Event()
        self.frames: list[dict[str, Any]] = []
        """Every message the agent sent, in order."""
        self.answered_at: dict[int, float] = {}
        """When the reply to each of our requests arrived (anyio clock)."""
        self.agent_requests: list[dict[str, Any]] = []
        self.permission_answer: PermissionAnswer = selected("allow_once")
        self.answer_overrides: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {}
        """Per method: answer the agent's request yourself (send the reply)."""
        self.missing_files_read_empty = False
        """Answer `fs/read_text_file` of a missing file with empty content, as Toad and
        CodeCompanion do, instead of an error."""
        self.dialect: Dialect = "v1"
        """The dialect negotiated: that of the first `initialize` the agent answered with a
        result (protocolVersion 2 or newer: v2, else v1); a repeated one keeps it."""
        self._negotiated = False
        self._initialize_dialects: dict[Any, Dialect] = {}
        self._asked: dict[Any, str] = {}
        """The method of each request we sent, by id: what the agent's answer must be."""
        self.schema_problems: list[str] = []
        """Each frame the agent sent that is not what the dialect's schema defines."""

    # --- sending -------------------------------------------------------------------------

    async def send(self, message: Any) -> None:
        self._note_sent(message)
        await self._to_agent.send(json.dumps(message).encode() + b"\n")

    async def send_together(self, *messages: dict[str, Any]) -> None:
        """Several frames in one write: the agent reads them before anything else runs."""
        for message in messages:
            self._note_sent(message)
        await self._to_agent.send(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    def _note_sent(self, message: Any) -> None:
        """Remember what the agent's answers must be: the dialect asked for and the method
        of each request (frames sent on purpose to provoke errors are ours, not checked)."""
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return
        if _hashable(message.get("id")):
            self._asked[message.get("id")] = message["method"]
        if message["method"] == "initialize" and _hashable(message.get("id")):
            params = message.get("params")
            version = params.get("protocolVersion") if isinstance(params, dict) else None
            # a newer version than ours is answered with our latest, 2
            newer = isinstance(version, int) and not isinstance(version, bool) and version >= 2
            self._initialize_dialects[message.get("id")] = "v2" if newer else "v1"

    def next_request(self, method: str, params: Any) -> tuple[int, dict[str, Any]]:
        """A request message and its id, to send with `send_together`."""
        request_id = next(self._ids)
        return request_id, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def start_request(self, method: str, params: Any = None) -> int:
        """Send a request without waiting; `reply(id)` waits for its answer."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return request_id

    async def reply(self, request_id: int) -> dict[str, Any]:
        return await self.wait_for(lambda f: f.get("id") == request_id and "method" not in f)

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        """The whole reply message (with `result` or `error`)."""
        return await self.reply(await self.start_request(method, params))

    async def call(self, method: str, params: Any = None) -> Any:
        reply = await self.request(method, params)
        assert "error" not in reply, reply
        return reply["result"]

    async def error(self, method: str, params: Any = None) -> dict[str, Any]:
        reply = await self.request(method, params)
        assert "error" in reply, reply
        return reply["error"]

    async def initialize(self, params: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "initialize", copy.deepcopy(ZED_INITIALIZE if params is None else params)
        )
        return result

    async def new_session(self, cwd: Path, **extra: Any) -> str:
        result = await self.call("session/new", {"cwd": str(cwd), "mcpServers": [], **extra})
        session_id: str = result["sessionId"]
        return session_id

    async def start_prompt(self, session_id: str, text: str) -> int:
        return await self.start_request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )

    async def prompt(self, session_id: str, text: str = "hi") -> dict[str, Any]:
        return await self.reply(await self.start_prompt(session_id, text))

    async def close(self) -> None:
        await self._to_agent.aclose()

    # --- what the agent sent -------------------------------------------------------------

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """The `update` objects of `session/update` notifications, in order."""
        return [
            f["params"]["update"]
            for f in self.frames
            if f.get("method") == "session/update"
            and (session_id is None or f["params"]["sessionId"] == session_id)
        ]

    def index_of(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        return next(i for i, f in enumerate(self.frames) if predicate(f))

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], within: float = TIMEOUT
    ) -> dict[str, Any]:
        with anyio.fail_after(within):
            seen = 0
            while True:
                for frame in self.frames[seen:]:
                    if predicate(frame):
                        return frame
                seen = len(self.frames)
                await self._changed.wait()

    # --- receiving -----------------------------------------------------------------------

    async def read_frames(self, from_agent: Any) -> None:
        async for line in read_lines(StreamSource(from_agent)):
            message = json.loads(line)
            self.frames.append(message)
            self._check_schema(message)
            if "method" in message and "id" in message:
                self.agent_requests.append(message)
                self._tg.start_soon(self._answer, message)
            elif "method" not in message and isinstance(message.get("id"), int):
                self.answered_at[message["id"]] = anyio.current_time()
            self._changed.set()
            self._changed = anyio.Event()

    def _check_schema(self, frame: Any) -> None:
        if not isinstance(frame, dict):
            self.schema_problems.append(f"not a JSON-RPC object: {frame!r}")
            return
        answered = None
        if "method" not in frame and _hashable(frame.get("id")):
            answered = self._asked.get(frame.get("id"))
            if answered == "initialize" and "result" in frame and not self._negotiated:
                self._negotiated = True
                self.dialect = self._initialize_dialects.get(frame.get("id"), "v1")
        problem = frame_problem(self.dialect, frame, "agent", answered)
        if problem is not None:
            self.schema_problems.append(problem)

    async def _answer(self, request: dict[str, Any]) -> None:
        override = self.answer_overrides.get(request["method"])
        if override is not None:
            await override(request)
            return
        params = request.get("params") or {}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        match request["method"]:
            case "fs/read_text_file":
                try:
                    reply["result"] = {"content": _read_lines(params)}
                except FileNotFoundError:
                    if self.missing_files_read_empty:
                        reply["result"] = {"content": ""}
                    else:
                        reply["error"] = {
                            "code": -32002,
                            "message": f"Resource not found: {params['path']}",
                        }
            case "fs/write_text_file":
                await anyio.Path(params["path"]).write_text(params["content"])
                reply["result"] = {}
            case "session/request_permission":
                answer = self.permission_answer
                reply["result"] = answer if isinstance(answer, dict) else await answer(params)
            case method:
                reply["error"] = {"code": -32601, "message": f"method not found: {method}"}
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self.send(reply)  # unless the connection already ended

    def agent_requests_for(self, method: str) -> list[dict[str, Any]]:
        return [r["params"] for r in self.agent_requests if r["method"] == method]


def _hashable(request_id: Any) -> bool:
    return request_id is None or isinstance(request_id, (int, str, float))


def _read_lines(params: dict[str, Any]) -> str:
    lines = Path(params["path"]).read_text().splitlines(keepends=True)
    first = (params.get("line") or 1) - 1
    limit = params.get("limit")
    return "".join(lines[first : None if limit is None else first + limit])
