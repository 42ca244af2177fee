"""The SDK side of one server: its transport and client session, held by one task.

`run_link` connects (transport, `ClientSession`, `initialize`, tool and prompt lists), marks
the link ready and serves it (refreshing the lists on `list_changed`) until the hub asks it
to stop or the connection ends; leaving closes everything in reverse order, and the SDK's
stdio transport ends a server as the spec says (close stdin, wait, then end the process
group). Everything is entered on one exit stack in this task, so no cancel scope crosses
tasks and nothing is held across a `yield`.

The handshake is the 2025-11-25 one (`initialize`, the SDK client's `mode="legacy"`): the
era in which servers send `notifications/tools/list_changed`, ask for `roots/list` and
elicitation as requests and take `notifications/cancelled`, which is what we build on. In
the 2026-07-28 era these move (subscriptions, input-required rounds) and a server written
against the classic API cannot elicit at all. Servers of that era that keep the handshake
(the SDK's do) answer it; one that speaks only 2026-07-28 fails with the reason.

A server in the editor speaks 2026-07-28 (the binding's revision), so for it the two moves
are made here: a `subscriptions/listen` stream carries its `list_changed` notifications to
the same handler as a classic server's, and a call (or prompt) answered `input_required`
has its questions (elicitation, sampling, roots) answered by the same callbacks and is
retried with the answers, up to `MAX_INPUT_ROUNDS` times.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from anyio.abc import ObjectReceiveStream, TaskGroup
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from .. import __version__
from ._callbacks import progress_callback, sdk_callbacks
from ._editor_transport import OUTER_FAILURE, editor_client
from ._link import Link
from ._results import map_result, prompt_infos, prompt_result, tool_infos
from ._schema import shield_listing
from ._stderr import StderrPipe
from ._stdio_transport import StartedServer, start_spec, stdio_streams
from .editor import EditorMcpFailed
from .errors import CallFailed
from .model import (
    HubHandlers,
    McpProgress,
    McpPromptInfo,
    McpToolInfo,
    McpToolResult,
    PromptResult,
)
from .specs import McpServerSpec

log = logging.getLogger(__name__)
T = TypeVar("T")

CLIENT_INFO = types.Implementation(name="acp-agent", version=__version__)
STDERR_GRACE = 1.0
"""Seconds to wait for a dead server's last stderr lines before reporting it."""
MAX_PAGES = 100
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
LISTEN_TIMEOUT = 5.0
"""Seconds a 2026-07-28 server has to acknowledge our `subscriptions/listen`; past them it
serves on, its lists read once."""
MAX_INPUT_ROUNDS = 10
"""`input_required` answers to one call before we give up on it (the SDK's own cap)."""
_STATE_ONLY_PAUSE = 0.1
"""Seconds before retrying an `input_required` that asks nothing (the server is busy)."""


def _result_type(value: Any) -> str:
    kind = value.get("resultType") if isinstance(value, dict) else None
    return "input" if kind == "input_required" else "done"


_CALL_OUTCOME: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    Annotated[
        Annotated[types.CallToolResult, Tag("done")]
        | Annotated[types.InputRequiredResult, Tag("input")],
        Discriminator(_result_type),
    ]
)

OnChange = Callable[[Link], Awaitable[None]]
OnProgress = Callable[[McpProgress], Awaitable[None]]


@dataclass(frozen=True)
class Settings:
    cwd: Path
    env: Mapping[str, str]
    """A stdio server's base environment (the spec's `env` goes on top)."""
    handlers: HubHandlers
    allow_sampling: bool


async def run_link(
    link: Link,
    attempt: int,
    settings: Settings,
    on_change: OnChange,
    started: StartedServer | Exception | None = None,
) -> None:
    """Connect `link`'s server and serve it; every failure ends up in `link`, reported once.
    `started`: a stdio server the hub started already (or why it could not)."""
    try:
        async with AsyncExitStack() as stack:
            await _connect_and_serve(link, attempt, settings, on_change, stack, started)
    except Exception as exc:
        log.debug("MCP server %r failed", link.name, exc_info=True)
        await settle_stderr(link)
        if link.fail(attempt, describe_error(exc, link.spec)):
            await on_change(link)
    finally:
        if link.state == "ready" and link.current(attempt):
            link.fail(attempt, "disconnected")  # left without a reason: never stay "ready"


async def _connect_and_serve(
    link: Link,
    attempt: int,
    settings: Settings,
    on_change: OnChange,
    stack: AsyncExitStack,
    started: StartedServer | Exception | None,
) -> None:
    spec = link.spec
    if spec.transport == "stdio":
        read, write = await _stdio(link, settings, stack, started)
    else:
        read, write = await stack.enter_async_context(await _transport(spec, settings, stack))
    watched = _WatchedStream(read, lambda: link.wake.set())
    session = await stack.enter_async_context(
        ClientSession(
            watched,
            write,
            client_info=CLIENT_INFO,
            **sdk_callbacks(link, settings.handlers, settings.cwd, settings.allow_sampling),
        )
    )
    try:
        await _handshake(session, spec)
        if spec.transport == "acp":
            await _listen_for_changes(link, session, stack)
        live = LiveSession(link, session)
        tools, warnings, prompts = await live.list_both()
    except Exception as exc:
        # Report before the teardown, which may wait for a stuck server.
        await settle_stderr(link)
        if link.fail(attempt, describe_error(exc, spec)):
            await on_change(link)
        return
    link.tools, link.warnings, link.prompts = tools, warnings, prompts
    if not link.ready(attempt, live):
        return
    log.info("MCP server %r ready: %d tools, %d prompts", link.name, len(tools), len(prompts))
    await on_change(link)
    await _serve(link, attempt, live, watched, on_change)


async def _handshake(session: ClientSession, spec: McpServerSpec) -> None:
    """`initialize`; a server in the editor speaks the binding's 2026-07-28 protocol, whose
    `server/discover` makes every later request carry its version and our capabilities."""
    if spec.transport == "acp":
        await session.discover()
    else:
        await session.initialize()


async def _listen_for_changes(link: Link, session: ClientSession, stack: AsyncExitStack) -> None:
    """Open a `subscriptions/listen` stream for the list changes the server announces; its
    `list_changed` notifications reach `message_handler` as a classic server's do. A server
    that refuses or never acknowledges it is served on, without them."""
    from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, listen

    capabilities = session.server_capabilities
    tools = bool(capabilities and capabilities.tools and capabilities.tools.list_changed)
    prompts = bool(capabilities and capabilities.prompts and capabilities.prompts.list_changed)
    if not (tools or prompts):
        return
    stream = listen(session, tools_list_changed=tools, prompts_list_changed=prompts)
    try:
        with anyio.fail_after(LISTEN_TIMEOUT):
            await stack.enter_async_context(stream)
    except (MCPError, SubscriptionLost, ListenNotSupportedError, TimeoutError) as exc:
        why = str(exc) or f"no acknowledgement within {LISTEN_TIMEOUT:g}s"
        log.warning("MCP server %r: its list changes will not be seen (%s)", link.name, why)


async def _serve(
    link: Link, attempt: int, live: LiveSession, watched: _WatchedStream, on_change: OnChange
) -> None:
    while True:
        await link.wake.wait()
        if link.stop.is_set() or not link.current(attempt):
            return
        link.wake = anyio.Event()
        if watched.ended:
            await settle_stderr(link)
            if link.fail(attempt, "the server closed the connection"):
                await on_change(link)
            return
        if link.refresh_tools or link.refresh_prompts:
            await _refresh(link, live, on_change)


async def _refresh(link: Link, live: LiveSession, on_change: OnChange) -> None:
    tools, prompts = link.refresh_tools, link.refresh_prompts
    link.refresh_tools = link.refresh_prompts = False
    try:
        if tools:
            link.tools, link.warnings = await live.list_tools()
        if prompts:
            link.prompts = await live.list_prompts()
    except Exception as exc:
        log.warning("MCP server %r: cannot refresh its lists: %s", link.name, exc)
        link.lists_refreshed()
        return
    await on_change(link)
    link.lists_refreshed()


async def _finish_pump(stderr: StderrPipe, pumps: TaskGroup) -> None:
    """After the transport closed: let the pump read the last lines, then stop it (a child
    of the server may hold the pipe open).

    Shielded: this runs while the connection unwinds, often from a cancellation, and an
    unshielded wait here re-raises that cancellation through the exit stack with itself as
    its `__context__`, a cycle on which anyio's task group then spins forever (3.11).
    """
    with anyio.move_on_after(STDERR_GRACE, shield=True):
        await stderr.done.wait()
    pumps.cancel_scope.cancel()


async def settle_stderr(link: Link) -> None:
    """Wait briefly for a stdio server's stderr to end, so a report has its last lines."""
    if link.stderr_done is not None:
        with anyio.move_on_after(STDERR_GRACE):
            await link.stderr_done.wait()


async def _stdio(
    link: Link, settings: Settings, stack: AsyncExitStack, started: StartedServer | Exception | None
) -> tuple[Any, Any]:
    """The streams of a stdio server: the one the hub started while the SDK was importing,
    else (a retry) one started now; its stderr pumped to the log until it closes."""
    if isinstance(started, Exception):
        raise started  # reported as a start that failed here would be
    if started is None:
        started = await start_spec(link.spec, link.stderr, settings.env, settings.cwd)
    # From here to the streams, no await that a cancel could interrupt: they own the process.
    stderr = started.stderr
    link.stderr_done = stderr.done
    pumps = await stack.enter_async_context(anyio.create_task_group())
    pumps.start_soon(stderr.pump)
    stack.push_async_callback(_finish_pump, stderr, pumps)
    return await stack.enter_async_context(stdio_streams(started.process, _parse_line, _dump))


def _parse_line(line: str) -> SessionMessage:
    return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))


def _dump(message: SessionMessage) -> str:
    return message.message.model_dump_json(by_alias=True, exclude_unset=True)


async def _transport(
    spec: McpServerSpec, settings: Settings, stack: AsyncExitStack
) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    if spec.transport == "acp":
        editor = settings.handlers.editor
        if editor is None or spec.server_id is None:
            raise EditorMcpFailed("there is no editor connection to reach it through")
        return editor_client(editor, spec.server_id)
    assert spec.url is not None
    if spec.transport == "sse":
        return sse_client(spec.url, headers=dict(spec.headers))
    client = await stack.enter_async_context(
        httpx2.AsyncClient(headers=dict(spec.headers), timeout=HTTP_TIMEOUT)
    )
    return streamable_http_client(spec.url, http_client=client)


class LiveSession:
    """A connected server's calls, in neutral terms (the link's `LiveServer`); used from
    any task."""

    def __init__(self, link: Link, session: ClientSession) -> None:
        self._link = link
        self._session = session

    @property
    def server(self) -> str:
        return self._link.name

    async def list_both(
        self,
    ) -> tuple[tuple[McpToolInfo, ...], tuple[str, ...], tuple[McpPromptInfo, ...]]:
        """Tools (with their warnings) and prompts, asked at once: a remote server's round
        trip is waited for once."""
        prompts: tuple[McpPromptInfo, ...] = ()

        async def list_prompts() -> None:
            nonlocal prompts
            prompts = await self.list_prompts()

        async with anyio.create_task_group() as group:
            group.start_soon(list_prompts)
            tools, warnings = await self.list_tools()
        return tools, warnings, prompts

    async def list_tools(self) -> tuple[tuple[McpToolInfo, ...], tuple[str, ...]]:
        capabilities = self._session.server_capabilities
        if capabilities is not None and capabilities.tools is None:
            return (), ()
        found: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor)
            )
            found.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tool_infos(self.server, found, trusted=self._link.spec.trusted)

    async def list_prompts(self) -> tuple[McpPromptInfo, ...]:
        capabilities = self._session.server_capabilities
        if capabilities is None or capabilities.prompts is None:
            return ()
        found: list[types.Prompt] = []
        cursor: str | None = None
        try:
            for _ in range(MAX_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor)
                page = await self._session.list_prompts(params=params)
                found.extend(page.prompts)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except (MCPError, ValidationError) as exc:
            log.warning("MCP server %r: cannot list its prompts: %s", self.server, exc)
        return prompt_infos(self.server, found)

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], on_progress: OnProgress | None
    ) -> McpToolResult:
        """A cancelled call sends the server `notifications/cancelled` (the SDK does)."""
        progress = progress_callback(self.server, on_progress) if on_progress else None

        def call(
            answers: types.InputResponses | None, state: str | None
        ) -> Awaitable[types.CallToolResult | types.InputRequiredResult]:
            params = types.CallToolRequestParams(
                name=name, arguments=dict(arguments), input_responses=answers, request_state=state
            )
            # Not `session.call_tool`: it fails a result whose structured content does not
            # match the tool's output schema, and the model is better served by the result.
            return self._session.send_request(
                types.CallToolRequest(params=params), _CALL_OUTCOME, progress_callback=progress
            )

        return map_result(await self._with_inputs(call, f"{name} with a result"))

    async def get_prompt(self, name: str, arguments: Mapping[str, str]) -> PromptResult:
        def ask(
            answers: types.InputResponses | None, state: str | None
        ) -> Awaitable[types.GetPromptResult | types.InputRequiredResult]:
            return self._session.get_prompt(
                name,
                dict(arguments),
                input_responses=answers,
                request_state=state,
                allow_input_required=True,
            )

        return prompt_result(await self._with_inputs(ask, "with a prompt"))

    async def _with_inputs(
        self,
        send: Callable[
            [types.InputResponses | None, str | None], Awaitable[T | types.InputRequiredResult]
        ],
        what: str,
    ) -> T:
        """`send`'s final answer: each `input_required` one (2026-07-28) has its questions
        answered by our callbacks, as a classic server's requests are, and is sent again."""
        answers: types.InputResponses | None = None
        state: str | None = None
        for round_ in range(MAX_INPUT_ROUNDS + 1):
            outcome = await self._answer(send(answers, state), what)
            if not isinstance(outcome, types.InputRequiredResult):
                return outcome
            if round_ == MAX_INPUT_ROUNDS:
                break
            if not outcome.input_requests:
                await anyio.sleep(_STATE_ONLY_PAUSE)
            answers, state = await self._inputs(outcome), outcome.request_state
        raise CallFailed(
            f"MCP server {self.server!r} still asked for input after {MAX_INPUT_ROUNDS} answers"
        )

    async def _inputs(self, asked: types.InputRequiredResult) -> types.InputResponses:
        answers: types.InputResponses = {}
        for key, request in (asked.input_requests or {}).items():
            context = ClientRequestContext(session=self._session, request_id=key)
            answer = await self._session.dispatch_input_request(context, request)
            if isinstance(answer, types.ErrorData):
                raise CallFailed(
                    f"MCP server {self.server!r} asked for {request.method}, which is not "
                    f"answered here: {answer.message}"
                )
            answers[key] = answer
        return answers

    async def roots_changed(self) -> None:
        await self._session.send_notification(types.RootsListChangedNotification())

    async def _answer(self, request: Awaitable[T], what: str) -> T:
        """The server's answer to `request`; `CallFailed` when it reports a failure, or
        answers `what` that is not MCP."""
        try:
            return await request
        except MCPError as exc:
            raise await self._failed(exc) from None
        except ValidationError as exc:
            raise CallFailed(
                f"MCP server {self.server!r} answered {what} that is not MCP: {_first_error(exc)}"
            ) from None

    async def _failed(self, exc: MCPError) -> CallFailed:
        if exc.code != types.CONNECTION_CLOSED:
            return CallFailed(f"MCP server {self.server!r}: {exc.error.message}")
        await settle_stderr(self._link)
        status = self._link.status()
        message = f"MCP server {self.server!r} closed the connection during the call"
        if status.stderr:
            message += "\nLast lines of its stderr:\n" + "\n".join(f"  {s}" for s in status.stderr)
        return CallFailed(message)


class _WatchedStream(ObjectReceiveStream[SessionMessage | Exception]):
    """The transport's read stream, telling us when it ends (the server went away), and
    shielding tool listings from the SDK's all-or-nothing schema validation. Iterating it
    and `async with` come from anyio's stream class, as the SDK's own streams have them."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end
        self.ended = False

    @property
    def last_context(self) -> Any:
        """The sender's context (the streamable HTTP transport has one per message)."""
        return getattr(self._inner, "last_context", None)

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self._on_end()

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._end()
            raise
        if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCResponse):
            result = item.message.result
            if isinstance(result, dict) and "tools" in result:
                shield_listing(result)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()


def describe_error(exc: BaseException, spec: McpServerSpec) -> str:
    """One line saying what failed, from the SDK's, the OS's or httpx's exception."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    match exc:
        case FileNotFoundError() if spec.transport == "stdio":
            return f"cannot start {spec.command!r}: command not found"
        case OSError() if spec.transport == "stdio":
            return f"cannot start {spec.command!r}: {exc.strerror or exc}"
        case MCPError(code=types.CONNECTION_CLOSED):
            return "the server closed the connection before it answered"
        case MCPError() if exc.error.data == OUTER_FAILURE:
            return exc.error.message
        case MCPError():
            return f"the server answered with an error: {exc.error.message}"
        case EditorMcpFailed():
            return str(exc)
        case httpx2.HTTPStatusError():
            return f"HTTP {exc.response.status_code} from {exc.request.url}"
        case httpx2.TransportError():
            return f"cannot reach {spec.url}: {exc or type(exc).__name__}"
        case ValidationError():
            return f"the server answered with something that is not MCP: {_first_error(exc)}"
        case _:
            return f"{type(exc).__name__}: {exc}"


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
