"""MCP bridge test helpers: real MCP servers (tests/mcp_servers) as stdio subprocesses, or
served in this process over streamable HTTP or SSE on a 127.0.0.1 port.

A module of its own, not conftest.py: test modules import these by name, and another
directory's conftest.py would shadow them when both are collected in one run."""

from __future__ import annotations

import socket
import sys
import uuid
from pathlib import Path
from types import TracebackType
from typing import Literal

import anyio
from anyio.abc import TaskGroup

from acp_agent.mcp_bridge import McpServerSpec, ServerStatus

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
