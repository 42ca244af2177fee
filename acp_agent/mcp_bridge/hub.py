"""One session's MCP servers: connected in parallel, in the background, each within a time
budget, watched, retried, and closed together.

    hub = McpHub(specs, cwd=session_cwd, config=config, handlers=HubHandlers(...))
    await task_group.start(hub.run)   # returns at once: the servers connect meanwhile
    await hub.connected()             # once every server connected or failed
    ...                               # hub.tools(), hub.call_tool(...), hub.statuses()
    await hub.aclose()                # from any task: every server closed, every child ended

`run` owns the task group that holds every connection (one task per server, see
`_connection.py`); start it in a task group that lives as long as the session (the
connection's), so cancelling that group (stdin EOF, shutdown) closes the servers too, those
still connecting included. For a hub used within one task, `async with McpHub(...) as hub:`
does both and waits for `connected()`.

A server that fails (cannot start, does not answer within `connect_timeout`, crashes) is
reported through `HubHandlers.on_change` and its status; the session goes on without it, and
the next use retries it: `reconnect()` (the session calls it before a turn), a call of one
of its tools or prompts. Each of these waits for the first connections first.

The `mcp` package is imported in the background by `run` (in a worker thread), not with
this module nor by the task that starts `run`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus

from ..child_env import child_environment
from ..config import AgentConfig, ShellEnvironmentPolicy
from ._link import Link
from ._sdk import import_without_server_side
from ._stdio_transport import StartedServer, start_spec
from .errors import ServerUnavailable, UnknownName
from .model import (
    HubHandlers,
    McpProgress,
    McpPromptInfo,
    McpToolInfo,
    McpToolResult,
    PromptResult,
    ServerStatus,
)
from .specs import McpServerSpec

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._connection import Settings
    from ._live import LiveServer

log = logging.getLogger(__name__)

_CONNECTION = f"{__package__}._connection"
"""The module that imports the `mcp` SDK."""
DEFAULT_CONNECT_TIMEOUT = 5.0
SERVER_ENV_POLICY = ShellEnvironmentPolicy(inherit="core")
"""What a stdio server inherits of our environment: the core few, never our keys."""


async def _stop_unclaimed(started: Mapping[str, StartedServer | Exception]) -> None:
    """Stop the servers no connection took over (the hub closed first), all at once."""
    with anyio.CancelScope(shield=True):  # also when the hub is being cancelled
        async with anyio.create_task_group() as tg:
            for server in started.values():
                if isinstance(server, StartedServer):
                    tg.start_soon(server.aclose)


class McpHub:
    def __init__(
        self,
        specs: Iterable[McpServerSpec],
        *,
        cwd: Path,
        config: AgentConfig | None = None,
        handlers: HubHandlers | None = None,
        connect_timeout: float | None = None,
        allow_sampling: bool | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """`config` gives the defaults of `connect_timeout` and `allow_sampling` and names
        our key variables; `environ` (default `os.environ`) is what stdio servers' base
        environment is made from."""
        self._links: dict[str, Link] = {spec.name: Link(spec) for spec in specs}
        self._cwd = cwd
        self._config = config
        self._handlers = handlers or HubHandlers()
        self.connect_timeout = (
            connect_timeout
            if connect_timeout is not None
            else (config.mcp_connect_timeout if config else DEFAULT_CONNECT_TIMEOUT)
        )
        self._allow_sampling = (
            allow_sampling
            if allow_sampling is not None
            else (config.mcp_allow_sampling if config else False)
        )
        self._environ = os.environ if environ is None else environ
        self._settings: Settings | None = None
        self._tg: TaskGroup | None = None
        self._closing = anyio.Event()
        self._connected = anyio.Event()
        """Set when every server's first attempt has connected or failed (or the hub closed)."""
        self._finished = anyio.Event()
        self._started = False
        self._own_tg: TaskGroup | None = None

    # --- lifetime --------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Report started at once and connect every server in the background (in parallel,
        each within `connect_timeout`: `connected()` waits for that); then hold the
        connections until `aclose()` (or cancellation) and close them all, those still
        connecting too."""
        if self._started:
            raise RuntimeError("McpHub.run may run once")
        self._started = True
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._connect_first)
                task_status.started()
                await self._closing.wait()
                for link in self._links.values():
                    link.close()
        finally:
            self._tg = None
            for link in self._links.values():
                link.close()
            self._connected.set()
            self._finished.set()

    async def connected(self) -> None:
        """Wait until every server's first attempt has connected or failed: at most
        `connect_timeout` after `run` started (the SDK import counts too)."""
        if self._started:
            await self._connected.wait()

    @property
    def connecting(self) -> bool:
        """The first attempts are still under way (`connected()` would wait)."""
        return self._started and not self._connected.is_set()

    async def aclose(self) -> None:
        """Close every server and wait until all are closed (stdio: ended); idempotent."""
        self._closing.set()
        if self._started:
            await self._finished.wait()
        else:
            for link in self._links.values():
                link.close()

    async def __aenter__(self) -> McpHub:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        try:
            await tg.start(self.run)
            await self.connected()
        except BaseException as exc:
            await tg.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._own_tg = tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        self._closing.set()
        assert self._own_tg is not None
        tg, self._own_tg = self._own_tg, None
        if exc_val is None or isinstance(exc_val, anyio.get_cancelled_exc_class()):
            return await tg.__aexit__(exc_type, exc_val, exc_tb)
        # An error in the body: close the servers, and let it go on as it is (not grouped).
        await tg.__aexit__(None, None, None)
        return None

    # --- what the servers offer ------------------------------------------------------------

    def statuses(self) -> list[ServerStatus]:
        """Every server, in the order given: state, tools, prompts, failure (for `/mcp`)."""
        return [link.status() for link in self._links.values()]

    def status(self, server: str) -> ServerStatus:
        return self._link(server).status()

    def tools(self) -> list[McpToolInfo]:
        """The ready servers' tools; a qualified name taken twice (a hash collision) keeps
        the first, in server order."""
        found: dict[str, McpToolInfo] = {}
        for link in self._links.values():
            if link.state != "ready":
                continue
            for tool in link.tools:
                other = found.setdefault(tool.qualified_name, tool)
                if other is not tool:
                    log.warning(
                        "MCP tool %s of %r skipped: its name is taken by %s of %r",
                        tool.name,
                        tool.server,
                        other.name,
                        other.server,
                    )
        return list(found.values())

    def find_tool(self, qualified_name: str) -> McpToolInfo | None:
        return next((t for t in self.tools() if t.qualified_name == qualified_name), None)

    def prompts(self) -> list[McpPromptInfo]:
        """The ready servers' prompts, as slash commands `<server>:<prompt>`."""
        return [p for link in self._links.values() if link.state == "ready" for p in link.prompts]

    def find_prompt(self, command: str) -> McpPromptInfo | None:
        return next((p for p in self.prompts() if p.command == command), None)

    # --- using them ------------------------------------------------------------------------

    async def reconnect(self, servers: Sequence[str] | None = None, *, wait: bool = True) -> None:
        """Retry failed servers (all, or those named); with `wait`, return once each has
        connected or failed again (within `connect_timeout`). The first attempts settle
        first: a server is not retried while it is still connecting."""
        await self.connected()
        if self._tg is None:
            return
        names = list(self._links) if servers is None else list(servers)
        links = [self._link(name) for name in names]
        retry = [link for link in links if link.state == "failed"]
        if retry:
            log.info("MCP: retrying %s", ", ".join(link.name for link in retry))
        if wait:
            await self._connect(retry, also_wait=[x for x in links if x.state == "connecting"])
        else:
            deadline = anyio.current_time() + self.connect_timeout
            attempts, failed = self._start(retry)
            self._tg.start_soon(self._settle, deadline, attempts, failed)

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        on_progress: Callable[[McpProgress], Awaitable[None]] | None = None,
    ) -> McpToolResult:
        """Call `tool` on `server` (retrying the server first if it failed). Cancelling the
        caller cancels the call (`notifications/cancelled`). Raises `ServerUnavailable`,
        `CallFailed`; a result with `is_error` is returned, not raised."""
        live = await self._live(server)
        result = await live.call_tool(tool, arguments, on_progress)
        await self._lists_current(self._link(server))
        return result

    async def get_prompt(
        self, server: str, prompt: str, arguments: Mapping[str, str] | None = None
    ) -> PromptResult:
        live = await self._live(server)
        return await live.get_prompt(prompt, arguments or {})

    async def roots_changed(self) -> None:
        """Tell the ready servers that the session's roots changed."""
        for link in self._links.values():
            if link.live is not None:
                try:
                    await link.live.roots_changed()
                except Exception as exc:
                    log.warning("MCP server %r: roots change not sent: %s", link.name, exc)

    # --- inside ----------------------------------------------------------------------------

    def _link(self, server: str) -> Link:
        link = self._links.get(server)
        if link is None:
            raise UnknownName(f"There is no MCP server named {server!r}.")
        return link

    async def _lists_current(self, link: Link) -> None:
        """After a call that changed the server's lists (it sends `list_changed` before its
        result): wait until they are read again, so the model's next request offers them."""
        await anyio.lowlevel.checkpoint()  # the notification's handler runs first
        with anyio.move_on_after(self.connect_timeout):
            await link.lists_read.wait()

    async def _live(self, server: str) -> LiveServer:
        link = self._link(server)
        if link.state in ("failed", "connecting"):
            await self.reconnect([server])
        if link.live is None:
            raise ServerUnavailable(link.status())
        return link.live

    async def _connect_first(self) -> None:
        deadline = anyio.current_time() + self.connect_timeout  # the import counts too
        started: dict[str, StartedServer | Exception] = {}
        try:
            if self._links:
                # The stdio servers start first, then the `mcp` SDK's client (~0.4 s of
                # imports) loads in a worker thread while they do: the wait is the longer of
                # the two, not their sum; the loop goes on serving the other sessions.
                await self._start_stdio_servers(started)
                await anyio.to_thread.run_sync(import_without_server_side, _CONNECTION)
            if not self._closing.is_set():
                await self._connect(list(self._links.values()), deadline=deadline, started=started)
        finally:
            self._connected.set()
            await _stop_unclaimed(started)

    async def _start_stdio_servers(self, started: dict[str, StartedServer | Exception]) -> None:
        """Each valid stdio server's process, started now, or why it could not start (the
        connection reports that as it reports a start of its own that fails), in `started`
        as soon as it is known, so that a cancel finds every process to stop."""
        env = self._server_env()
        for link in self._links.values():
            spec = link.spec
            if spec.transport != "stdio" or spec.problem() is not None:
                continue
            try:
                with anyio.CancelScope(shield=True):  # a process started is never lost
                    started[spec.name] = await start_spec(spec, link.stderr, env, self._cwd)
            except Exception as exc:
                started[spec.name] = exc

    async def _connect(
        self,
        links: Sequence[Link],
        also_wait: Sequence[Link] = (),
        deadline: float | None = None,
        started: dict[str, StartedServer | Exception] | None = None,
    ) -> None:
        """Start an attempt for each link, wait for all (and `also_wait`) to settle within
        the budget (or until `deadline`), and fail the ones that did not. `started`: stdio
        servers already running, taken out of it as their attempts take them over."""
        if deadline is None:
            deadline = anyio.current_time() + self.connect_timeout
        attempts, failed = self._start(links, started)
        attempts += [(link, link.attempt) for link in also_wait]
        await self._settle(deadline, attempts, failed)

    def _start(
        self, links: Sequence[Link], started: dict[str, StartedServer | Exception] | None = None
    ) -> tuple[list[tuple[Link, int]], list[Link]]:
        """Begin an attempt for each link, at once (a second retry cannot start another);
        returns the attempts, and the links whose spec cannot be connected (failed)."""
        tg = self._tg
        if tg is None or not links:
            return [], []
        settings = self._connection_settings()
        from ._connection import run_link  # imported by `_connect_first`, in a worker thread

        attempts: list[tuple[Link, int]] = []
        failed: list[Link] = []
        for link in links:
            attempt = link.begin()
            problem = link.spec.problem()
            if problem is not None:
                link.fail(attempt, problem)
                failed.append(link)
                continue
            attempts.append((link, attempt))
            server = started.pop(link.name, None) if started is not None else None
            tg.start_soon(self._attempt, link, attempt, settings, run_link, server)
        return attempts, failed

    async def _settle(
        self, deadline: float, attempts: Sequence[tuple[Link, int]], failed: Sequence[Link]
    ) -> None:
        for link in failed:
            await self._changed(link)
        with anyio.CancelScope(deadline=deadline):
            for link, _ in attempts:
                await link.settled.wait()
        for link, attempt in attempts:
            if link.state != "connecting" or link.attempt != attempt:
                continue
            link.fail(attempt, f"did not connect within {self.connect_timeout:g}s")
            if link.scope is not None:
                link.scope.cancel()
            await self._changed(link)

    async def _attempt(
        self,
        link: Link,
        attempt: int,
        settings: Settings,
        run_link: Any,
        started: StartedServer | Exception | None = None,
    ) -> None:
        if link.state != "connecting" or link.attempt != attempt:
            if isinstance(started, StartedServer):
                await started.aclose()
            return  # timed out before it started
        with anyio.CancelScope() as scope:
            link.scope = scope
            await run_link(link, attempt, settings, self._changed, started)

    def _server_env(self) -> dict[str, str]:
        return child_environment(self._environ, self._config, policy=SERVER_ENV_POLICY)

    def _connection_settings(self) -> Settings:
        if self._settings is None:
            from ._connection import Settings

            self._settings = Settings(
                cwd=self._cwd,
                env=self._server_env(),
                handlers=self._handlers,
                allow_sampling=self._allow_sampling,
            )
        return self._settings

    async def _changed(self, link: Link) -> None:
        status = link.status()
        if status.state == "failed":
            log.warning("%s", status.describe_failure())
        on_change = self._handlers.on_change
        if on_change is None:
            return
        try:
            await on_change(status)
        except Exception:
            log.exception("MCP: on_change failed")
