"""A session's MCP servers: the config's and the editor's, connecting in the background
from the moment the session starts (all at once, each within its time budget), offered to
the model as tools, reported to the user when they fail, retried before each turn, closed
with the session (those still connecting too).

The session's answer never waits for them (nor for the `mcp` import): the first prompt
does, within the time budget, in its place in the session's queue (a cancel stops the
wait); the servers' prompts (slash commands) follow in a commands update when they arrive.

What servers ask of us is answered from the session: `roots/list` with its roots, an
elicitation as a question to the user when the editor can ask one (else declined).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from ..config import AgentConfig
from ..mcp_bridge import McpError, McpServerSpec, merge_specs, specs_from_config
from ..messages import Elicitation, Message, MessageChunk, Notice, TurnEvent, TurnStopReason
from ..tools import Tool
from .channel import EditorLink
from .session import QueuePlace, Session

if TYPE_CHECKING:
    from ..mcp_bridge import (
        ElicitationReply,
        ElicitationRequest,
        McpHub,
        McpPromptInfo,
        ServerStatus,
    )
    from .mcp_tools import RunningCalls

log = logging.getLogger(__name__)

CLOSE_SECONDS = 5.0

Changed = Callable[[str], Awaitable[None]]
"""Called with the session id when its servers' prompts (slash commands) changed."""


class PromptUsageError(ValueError):
    """A prompt command typed with the wrong arguments; the message shows the usage."""


@dataclass
class _SessionServers:
    hub: McpHub
    specs: tuple[McpServerSpec, ...]
    calls: RunningCalls
    announced: bool = False
    """The editor knows the session id, so reports may go out."""
    pending: list[TurnEvent] = field(default_factory=list)
    reported: dict[str, str | None] = field(default_factory=dict)
    """The last state told to the user, per server."""


@dataclass(eq=False)
class McpServers:
    """Every session's MCP servers."""

    config: AgentConfig
    link: EditorLink
    env: Mapping[str, str]
    """What the servers' environment is made from (`child_environment`)."""
    background: TaskGroup | None
    """The connection's task group, which runs the servers; None: no servers connect."""
    on_prompts_changed: Changed
    _sessions: dict[str, _SessionServers] = field(default_factory=dict, init=False, repr=False)

    async def connect(self, session: Session, given: Sequence[McpServerSpec]) -> None:
        """Start connecting the session's servers in the background; returns at once
        (`wait_connected` waits for them).

        A live session given other servers (a client that loads or resumes it again) gets
        the new set, unless a turn is running: its tool calls keep the servers they use."""
        specs = tuple(merge_specs(specs_from_config(self.config), given))
        current = self._sessions.get(session.id)
        if current is not None:
            if current.specs == specs:
                return
            if session.busy:
                log.info("session %s is busy: its MCP servers stay as they are", session.id)
                return
            await self.close(session.id)
        if not specs or self.background is None:
            return
        # The hub and the MCP tools' adapter (with its arguments model) load with the first
        # session that has servers, not before a session answers.
        from ..mcp_bridge import HubHandlers, McpHub
        from .mcp_tools import RunningCalls

        hub = McpHub(
            specs,
            cwd=session.cwd,
            config=self.config,
            handlers=HubHandlers(
                roots=lambda: session.roots,
                elicit=self._elicit_for(session.id),
                on_change=lambda status: self._changed(session.id, status),
                editor=self.link.editor_mcp,
            ),
            environ=self.env,
        )
        self._sessions[session.id] = _SessionServers(hub, specs, RunningCalls())
        await self.background.start(hub.run)

    def tools(self, session_id: str, builtin: Mapping[str, Tool[Any]]) -> Mapping[str, Tool[Any]]:
        """The session's tools, read anew at every use (a server's list may change)."""
        servers = self._sessions.get(session_id)
        return builtin if servers is None else _LiveTools(builtin, servers.hub, servers.calls)

    async def wait_connected(self, session: Session, place: QueuePlace) -> TurnStopReason | None:
        """Before a prompt: wait for the session's servers still connecting for the first
        time (within their time budget), in the prompt's `place` in the session's queue, so
        `session.cancel()` stops the wait. "cancelled" when it did, else None."""
        servers = self._sessions.get(session.id)
        if servers is None or not servers.hub.connecting:
            return None
        hub = servers.hub

        async def until_connected() -> TurnStopReason:
            await hub.connected()
            return "end_turn"

        stop = await session.run_turn(until_connected, place)
        return "cancelled" if stop == "cancelled" else None

    async def settled(self) -> None:
        """Returns once no session's servers are connecting for the first time (each within
        its time budget): the work that a prompt sent now would wait for."""
        while connecting := [s.hub for s in self._sessions.values() if s.hub.connecting]:
            for hub in connecting:
                await hub.connected()

    async def before_turn(self, session_id: str) -> None:
        """Wait for the servers still connecting for the first time, then retry failed
        servers in the background: their tools return when they connect."""
        servers = self._sessions.get(session_id)
        if servers is not None:
            await servers.hub.reconnect(wait=False)

    def prompts(self, session_id: str) -> list[McpPromptInfo]:
        servers = self._sessions.get(session_id)
        return servers.hub.prompts() if servers is not None else []

    def describe(self, session_id: str) -> str:
        """Each server's state, tools and prompts (for `/mcp`)."""
        servers = self._sessions.get(session_id)
        if servers is None:
            return "No MCP servers: none are configured, and the editor gave this session none."
        return "\n\n".join(status.describe() for status in servers.hub.statuses())

    async def prompt_messages(
        self, session_id: str, info: McpPromptInfo, argument: str
    ) -> tuple[Message, ...]:
        """The messages of the prompt `info` for the arguments typed after its command."""
        servers = self._sessions[session_id]
        arguments = _prompt_arguments(info, argument)
        result = await servers.hub.get_prompt(info.server, info.name, arguments)
        return result.messages

    async def announce(self, session_id: str) -> None:
        """The editor knows the session now: tell it what happened meanwhile."""
        servers = self._sessions.get(session_id)
        if servers is None:
            return
        servers.announced = True
        pending, servers.pending = servers.pending, []
        for event in pending:
            await self.link.channel(session_id).emit(event)

    async def close(self, session_id: str) -> None:
        servers = self._sessions.pop(session_id, None)
        if servers is not None:
            with anyio.move_on_after(CLOSE_SECONDS, shield=True):
                await servers.hub.aclose()

    async def aclose(self) -> None:
        for session_id in list(self._sessions):
            await self.close(session_id)

    # --- what servers tell us and ask of us ----------------------------------------------

    async def _changed(self, session_id: str, status: ServerStatus) -> None:
        servers = self._sessions.get(session_id)
        if servers is None:
            return
        text = _report(status, servers.reported.get(status.name, "none"))
        if status.state in ("ready", "failed"):
            servers.reported[status.name] = status.error
        if text is not None:
            # A client that shows notices keeps them out of the reply (`acp-agent run`
            # prints only the reply on stdout); others read the bracketed line in it.
            event = _notice(status) if self.link.shows_notices else MessageChunk(text)
            if servers.announced:
                await self.link.channel(session_id).emit(event)
            else:
                servers.pending.append(event)
        if servers.announced:
            await self.on_prompts_changed(session_id)

    def _elicit_for(
        self, session_id: str
    ) -> Callable[[ElicitationRequest], Awaitable[ElicitationReply | None]] | None:
        modes = self.link.elicitation_modes
        if not modes:
            return None  # servers are told we cannot ask, and a request is declined

        async def elicit(request: ElicitationRequest) -> ElicitationReply | None:
            if request.mode not in modes:
                return None
            servers = self._sessions.get(session_id)
            answer = await self.link.channel(session_id).elicit(
                Elicitation(
                    message=f"{request.server}: {request.message}",
                    mode=request.mode,
                    schema=request.schema,
                    url=request.url,
                    elicitation_id=request.elicitation_id,
                    tool_call_id=servers.calls.only(request.server) if servers else None,
                )
            )
            from ..mcp_bridge import ElicitationReply  # loaded with the hub that asks

            return ElicitationReply(answer.action, answer.content)

        return elicit


class _LiveTools(Mapping[str, Tool[Any]]):
    """The built-in tools and the ready servers' tools as they are at each lookup."""

    def __init__(self, builtin: Mapping[str, Tool[Any]], hub: McpHub, calls: RunningCalls) -> None:
        self._builtin = builtin
        self._hub = hub
        self._calls = calls

    def _now(self) -> dict[str, Tool[Any]]:
        from .mcp_tools import mcp_tools  # loaded by `connect` already

        return {**self._builtin, **mcp_tools(self._hub, self._calls)}

    def __getitem__(self, name: str) -> Tool[Any]:
        return self._now()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


def _report(status: ServerStatus, last: str | None) -> str | None:
    """What to tell the user of a server's new state, once per change; None: nothing new."""
    if status.state == "failed" and status.error != last:
        return (
            f"\n[{status.describe_failure()}\nThe session goes on without it; it is retried "
            "before the next prompt. /mcp shows every server.]\n"
        )
    if status.state == "ready" and last not in ("none", None):
        return f"\n[MCP server {status.name!r} is connected now: {len(status.tools)} tools.]\n"
    return None


def _notice(status: ServerStatus) -> Notice:
    """What `_report` says, as a notice: its first line is the title."""
    if status.state != "failed":
        return Notice(f"MCP server {status.name!r} is connected now: {len(status.tools)} tools")
    title, *stderr = status.describe_failure().splitlines()
    after = "The session goes on without it; it is retried before the next prompt. /mcp "
    return Notice(title, "\n".join([*stderr, after + "shows every server."]), "warning")


def _prompt_arguments(info: McpPromptInfo, typed: str) -> dict[str, str]:
    """`name=value` pairs, or plain words filling the arguments in order."""
    try:
        words = shlex.split(typed)
    except ValueError as exc:
        raise PromptUsageError(f"{exc}\n{_usage(info)}") from None
    values: dict[str, str] = {}
    names = [argument.name for argument in info.arguments]
    positional = iter(names)
    for word in words:
        key, equals, value = word.partition("=")
        if equals and key in names:
            values[key] = value
        else:
            name = next((n for n in positional if n not in values), None)
            if name is None:
                raise PromptUsageError(f"too many arguments\n{_usage(info)}")
            values[name] = word
    missing = [a.name for a in info.arguments if a.required and a.name not in values]
    if missing:
        raise PromptUsageError(f"missing {', '.join(missing)}\n{_usage(info)}")
    return values


def _usage(info: McpPromptInfo) -> str:
    def shown(argument: Any) -> str:
        return f"<{argument.name}>" if argument.required else f"[{argument.name}]"

    return f"Usage: /{info.command} " + " ".join(shown(a) for a in info.arguments)


__all__ = ["McpError", "McpServers", "PromptUsageError"]
