"""Subagents: the child sessions the `agent` tool starts.

A child is a session of its own (id, history, log, usage) made in the parent's place: the
same cwd and roots, permission mode, editor prompt and project instructions, the parent's
MCP servers (their connections are shared, not started again), and the tools the call
named. It gets the task as its first prompt, and its last reply is the call's result; what
it cost is added to the parent's cost.

The editor sees it in one of two ways. A client that advertised `subagents` is told of the
child on the parent (`SubagentChanged`, before anything of the child's) and then gets the
child's updates and permission questions under the child's own id; `session/cancel` with
that id stops just the child. Any other client sees the child's work inside the parent's
tool call: one line per tool call the child makes, then its reply.

Cancelling the parent's turn cancels its children's (they run inside the parent's tool
call); closing the parent closes them (`Lifecycle.close`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config import AgentConfig
from ..messages import (
    Elicitation,
    ElicitationAnswer,
    Message,
    SubagentChanged,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEvent,
)
from ..providers import ProviderError
from ..tools import Decision, Delegation, PermissionQuestion, ToolContext, ToolFailed
from ..tools.base import ToolOutcome
from .channel import EditorLink, SessionChannel
from .lifecycle import Where
from .records import ChoiceRecord
from .session import Session

if TYPE_CHECKING:
    from .lifecycle import Lifecycle
    from .turns import TurnRunner

log = logging.getLogger(__name__)

Delegate = Callable[[Delegation, ToolContext], Awaitable[ToolOutcome]]


@dataclass(eq=False)
class Subagents:
    """Starts and runs every session's subagents."""

    config: AgentConfig
    link: EditorLink
    _lifecycle: Lifecycle | None = field(default=None, init=False, repr=False)

    def attach(self, lifecycle: Lifecycle) -> None:
        """The lifecycle that makes the children: built after the turn runner, which needs
        this object first (the one late binding in the house)."""
        self._lifecycle = lifecycle

    def delegate(self, runner: TurnRunner, parent: Session) -> Delegate:
        """What `ToolContext.delegate` is for one of `parent`'s turns."""

        async def start(delegation: Delegation, ctx: ToolContext) -> ToolOutcome:
            return await self._run(runner, parent, delegation, ctx)

        return start

    async def _run(
        self, runner: TurnRunner, parent: Session, task: Delegation, ctx: ToolContext
    ) -> ToolOutcome:
        child = await self._child(runner, parent, task)
        await ctx.emit(SubagentChanged(child.id, task.description, "running"))
        if self.link.shows_subagents:
            channel: SessionChannel = self.link.channel(child.id)
        else:
            channel = InToolCall(self.link.channel(parent.id), ctx.tool_call_id, ctx.emit)
        assert self._lifecycle is not None
        entry = self._lifecycle.get(child.id)
        prompt = Message("user", [TextPart(task.prompt)])
        try:
            stop = await child.run_turn(lambda: runner.run(child, entry.writer, prompt, channel))
        except ProviderError as exc:
            await ctx.emit(SubagentChanged(child.id, task.description, "idle"))
            raise ToolFailed(f"The subagent failed: {exc}") from None
        finally:
            if child.usage.cost_usd:
                parent.usage.cost_usd = (parent.usage.cost_usd or 0.0) + child.usage.cost_usd
        await ctx.emit(SubagentChanged(child.id, task.description, "idle", stop))
        if stop == "cancelled":
            raise ToolFailed("The subagent was cancelled before it finished.")
        reply = _last_reply(child) or "(the subagent ended without a reply)"
        if stop != "end_turn":
            reply += f"\n\n[The subagent stopped early: {stop}.]"
        return ToolOutcome(
            model_text=reply,
            display=(TextPart(reply),),
            raw_output={"sessionId": child.id, "stopReason": stop},
        )

    def _configured_model(self, runner: TurnRunner, parent: Session) -> str | None:
        """`subagent_model`, unless the editor disabled its provider (then the parent's)."""
        configured = self.config.subagent_model
        if configured is None or runner.providers.enabled(configured.split("/", 1)[0]):
            return configured
        log.info(
            "subagent model %s: the editor disabled its provider; using %s",
            configured,
            parent.model_choice,
        )
        return None

    async def _child(self, runner: TurnRunner, parent: Session, task: Delegation) -> Session:
        """The child session, live and logged, in the parent's place and mode."""
        choice = task.model or self._configured_model(runner, parent) or parent.model_choice
        try:
            choice = self.config.find_model(choice)[0]
        except ValueError as exc:
            raise ToolFailed(f"model: {exc}") from None
        if not runner.providers.enabled(choice.split("/", 1)[0]):
            raise ToolFailed(f"model: {choice}: its provider was disabled by the editor")
        allowed = None
        if task.tools is not None:
            offered = set(runner.offered_tools(parent)) - {"agent"}
            unknown = [name for name in task.tools if name not in offered]
            if unknown:
                raise ToolFailed(
                    f"tools: not among yours: {', '.join(unknown)}; you have: "
                    f"{', '.join(sorted(offered))}"
                )
            allowed = frozenset(task.tools)
        assert self._lifecycle is not None
        child = await self._lifecycle.new(
            Where(parent.cwd, parent.additional_roots), editor_prompt=parent.editor_prompt
        )
        child.parent_id, child.depth, child.allowed_tools = parent.id, parent.depth + 1, allowed
        child.model_choice, child.mode = choice, parent.mode
        child.thought_level = parent.thought_level
        self._lifecycle.get(child.id).writer.append(ChoiceRecord(model=choice, mode=child.mode))
        parent.children.append(child.id)
        log.info(
            "session %s: subagent %s (%s) on %s", parent.id, child.id, task.description, choice
        )
        return child


def _last_reply(session: Session) -> str:
    for message in reversed(session.history):
        if message.role == "assistant" and message.text.strip():
            return message.text.strip()
    return ""


@dataclass(eq=False)
class InToolCall:
    """A subagent's channel for a client that knows no child sessions: its work shows as
    lines in the parent's tool call; its questions go to the user as the parent's would."""

    parent: SessionChannel
    tool_call_id: str
    emit_to_parent: Callable[[TurnEvent], Awaitable[None]]
    _lines: list[str] = field(default_factory=list)

    async def emit(self, event: TurnEvent) -> None:
        # One line per tool call: streaming the child's text into the parent's call would
        # resend it whole with every chunk. Its reply is the call's result at the end.
        if isinstance(event, ToolCallStarted):
            self._lines.append(f"- {event.title}")
            shown = "\n".join(self._lines[-20:])
            await self.emit_to_parent(
                ToolCallUpdated(self.tool_call_id, content=(TextPart(shown),))
            )

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        return await self.parent.ask_permission(question)

    async def elicit(self, elicitation: Elicitation) -> ElicitationAnswer:
        return await self.parent.elicit(elicitation)

    @asynccontextmanager
    async def streaming(self) -> AsyncIterator[None]:
        yield
