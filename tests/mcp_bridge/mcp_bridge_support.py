"""MCP bridge test helpers: real MCP servers (tests/mcp_servers) as stdio subprocesses, or
served in this process over streamable HTTP or SSE on a 127.0.0.1 port.

A module of its own, not conftest.py: test modules import these by name, and another
directory's conftest.py would shadow them when both are collected in one run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
from anyio.abc import TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from acp_agent.mcp_bridge import McpServerSpec, ServerStatus

if TYPE_CHECKING:
    from acp_agent.mcp_bridge import EditorMcpAnswer, EditorMcpMessage

SERVERS = Path(__file__).resolve().parent.parent / "mcp_servers"
E2E = Path(__file__).resolve().parent.parent / "e2e"
for _path in (SERVERS, E2E):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

MARK = "ACP_MCP_TEST_MARK"
"""Every stdio server gets `MARK=<unique>` so the process table check finds its children."""


def stdio_spec(name: str, script: str, *args: str, **env: str) -> McpServerSpec:
    return McpServerSpec(
        name=name,
        command=sys.executable,
        args=(str(SERVERS / script), *args),
        env={MARK: env.pop(MARK, uuid.uuid4().hex), **env},
    )


class Changes:
    """Collects `on_change` reports; `wait_for` waits (without sleeping) for a matching one."""

    def __init__(self) -> None:
        self.seen: list[ServerStatus] = []
        self._event = anyio.Event()

    async def __call__(self, status: ServerStatus) -> None:
        self.seen.append(status)
        self._event.set()
        self._event = anyio.Event()

    async def wait_for(self, name: str, state: str, *, tool: str | None = None) -> ServerStatus:
        with anyio.fail_after(15):
            while True:
                for status in self.seen:
                    wanted = tool is None or tool in status.tools
                    if status.name == name and status.state == state and wanted:
                        return status
                await self._event.wait()


class WebServer:
    """`everything.build()` served by uvicorn on a socket bound to 127.0.0.1 beforehand, so
    a client can connect as soon as this is entered."""

    def __init__(self, kind: Literal["http", "sse"]) -> None:
        import uvicorn
        from everything import build

        server = build("web")
        app = server.streamable_http_app() if kind == "http" else server.sse_app()
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        port = self.socket.getsockname()[1]
        path = "/mcp" if kind == "http" else "/sse"
        self.url = f"http://127.0.0.1:{port}{path}"
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(config)
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> WebServer:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._server.serve, [self.socket])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._server.should_exit = True
        assert self._tg is not None
        try:
            return await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            self.socket.close()


class RelayEditor:
    """An editor that provides one MCP server over ACP: each `mcp/message` request the
    bridge sends (`EditorMcp`'s `Send`) is relayed to a real MCP server subprocess in raw
    JSON-RPC lines under its `requestId`; the server's progress comes back through
    `EditorMcp.deliver`, and a request the bridge gives up on is cancelled on the server.
    `refuse` names tools whose calls the editor answers with an inner MCP error."""

    def __init__(self, server_id: str, script: str = "everything.py") -> None:
        from acp_agent.mcp_bridge import EditorMcp

        self.server_id = server_id
        self.script = script
        self.mcp = EditorMcp(self.send)
        self.asked: list[str] = []
        self.refuse: set[str] = set()
        self._pending: dict[str, anyio.abc.ObjectSendStream[dict[str, Any]]] = {}
        self._progress: dict[Any, str] = {}
        """The progress tokens of the requests under way, and their request ids."""
        self._process: anyio.abc.Process | None = None

    async def __aenter__(self) -> RelayEditor:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._process = await anyio.open_process(
            [sys.executable, str(SERVERS / self.script)], stderr=subprocess.DEVNULL
        )
        self._tg.start_soon(self._read)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._process is not None and self._process.stdin is not None
        await self._process.stdin.aclose()  # the server ends at EOF, and `_read` with it
        with anyio.fail_after(10):
            await self._process.wait()
        await self._tg.__aexit__(None, None, None)
        await self._process.aclose()

    async def send(self, message: EditorMcpMessage) -> EditorMcpAnswer:
        from acp_agent.mcp_bridge import EditorMcpAnswer, EditorMcpFailed

        params = message.params or {}
        self.asked.append(f"{message.method} {params.get('name', '')}".strip())
        if message.server_id != self.server_id:
            raise EditorMcpFailed("MCP server registration unavailable (-33001)")
        if message.method == "tools/call" and params.get("name") in self.refuse:
            return EditorMcpAnswer(error={"code": -32603, "message": "refused by the editor"})
        reply_send, reply = anyio.create_memory_object_stream[dict[str, Any]](1)
        self._pending[message.request_id] = reply_send
        token = params.get("_meta", {}).get("progressToken")
        self._progress[token] = message.request_id
        await self._write({"id": message.request_id, "method": message.method, "params": params})
        try:
            answer = await reply.receive()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                cancelled = {"requestId": message.request_id}
                await self._write({"method": "notifications/cancelled", "params": cancelled})
            raise
        finally:
            del self._pending[message.request_id]
            self._progress.pop(token, None)
        if "error" in answer:
            return EditorMcpAnswer(error=answer["error"])
        return EditorMcpAnswer(result=answer["result"])

    async def _write(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        line = json.dumps({"jsonrpc": "2.0", **message}) + "\n"
        await self._process.stdin.send(line.encode())

    async def _read(self) -> None:
        from acp_agent.mcp_bridge import EditorMcpMessage

        assert self._process is not None and self._process.stdout is not None
        lines = BufferedByteReceiveStream(self._process.stdout)
        while True:
            try:
                message = json.loads(await lines.receive_until(b"\n", 1 << 20))
            except (anyio.EndOfStream, anyio.IncompleteRead):
                return
            waiting = self._pending.get(message.get("id"))
            if waiting is not None:
                await waiting.send(message)
            elif (request_id := self._request_of(message)) is not None:
                params = message["params"]
                self.mcp.deliver(
                    EditorMcpMessage(self.server_id, request_id, message["method"], params)
                )

    def _request_of(self, notification: dict[str, Any]) -> str | None:
        """The request a server's notification belongs to: a call's progress names its
        token, a `subscriptions/listen` stream's frames its request id."""
        params = notification.get("params") or {}
        if notification.get("method") == "notifications/progress":
            return self._progress.get(params.get("progressToken"), "")
        listened = params.get("_meta", {}).get("io.modelcontextprotocol/subscriptionId")
        return listened if listened in self._pending else None
