"""One prompt turn of a session, built and run: the provider and settings its choices name
(read anew for every model request), its tools, a host that shows the turn's events to the
editor while the recorder writes them to the log, compaction when the context fills up;
then the turn's end in the log, and a title after the first one.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from ..child_env import child_environment
from ..config import AgentConfig
from ..engine import ModelSettings, ModelSetup, Turn
from ..messages import (
    Message,
    SessionInfoChanged,
    TurnEvent,
    TurnStopReason,
)
from ..paths import user_config_path
from ..providers import ProviderError
from ..providers.pool import ProviderPool
from ..tools import Decision, PermissionQuestion, Tool, ToolContext
from ..tools.permissions import PermissionMode, tools_for_mode
from .channel import EditorLink, SessionChannel
from .choices import speed, thought_level
from .compaction import CompactionPolicy, Compactor, Emit, TurnCompaction
from .outcomes import failure_text, no_reply_marker, unanswered
from .project import ProjectKnowledge
from .recorder import TurnRecorder
from .records import (
    TURN_FAILED,
    PermissionsRecord,
    TitleRecord,
    TurnEndRecord,
    UsageRecord,
    utc_now,
)
from .servers import McpServers
from .session import Session
from .store import LogWriter
from .titles import TITLE_SECONDS, first_prompt_text, first_prompt_title, generated_title

if TYPE_CHECKING:
    from .subagents import Delegate, Subagents

logger = logging.getLogger(__name__)

Inserted = Callable[[str], Awaitable[None]]
"""Told the id of a prompt's user message as it joins the history (protocol v2 answers the
prompt then); awaited, so what it sends goes out before the turn's first event."""

SYNC_SECONDS = 2.0
"""Time allowed to fsync a log at a turn's end (also when the turn was cancelled)."""


@dataclass(frozen=True, slots=True)
class TurnRunner:
    """Builds and runs the turns of every session."""

    config: AgentConfig
    link: EditorLink
    providers: ProviderPool
    servers: McpServers
    tools: Mapping[str, Tool[Any]]
    """The built-in tools; each session's MCP servers add theirs."""
    env: Mapping[str, str]
    """The agent's environment: local commands start from `child_environment` of it."""
    background: TaskGroup | None
    """The connection's task group: titles are written there, beside the turns."""
    project: ProjectKnowledge
    """The sessions' instruction files, skills and prompt files: the system prompt."""
    subagents: Subagents | None = None
    """Starts the `agent` tool's child sessions; None: no subagents."""

    async def run(
        self,
        session: Session,
        log: LogWriter,
        message: Message,
        channel: SessionChannel | None = None,
        *,
        inserted: Inserted | None = None,
    ) -> TurnStopReason:
        """One turn; `channel`: where its events go, when not to the session's own (a
        subagent shown inside its parent's tool call); `inserted`: awaited with the user
        message's id as it joins the history, before the turn's first event."""
        # Not at import time: it reads files as read_file does, a tool built after start-up.
        from .mentions import MentionReader, MentionsCancelled

        # An unknown model or a provider that fails to load fails the prompt before it
        # joins the history.
        await self.model_setup(session)
        await self.servers.before_turn(session.servers_of)
        channel = channel or self.link.channel(session.id)
        if (notice := self.project.first_notice(session)) is not None:
            await channel.emit(notice)
        message = await self.project.with_requested_skills(session, message)
        recorder = TurnRecorder(log)
        remembered = session.permissions.to_json()
        host = _TurnHost(channel, recorder)
        context = self._tool_context(session, channel)
        mentions = MentionReader(
            context, host, session.mode, session.permissions, self.config.mention_max_bytes
        )
        turn = Turn(
            choices=_LiveChoices(self, session),
            history=session.history,
            tools=self.session_tools(session),
            max_concurrent_calls=self.config.subagent_concurrency,
            context=context,
            host=host,
            max_turn_requests=self.config.max_turn_requests,
            meter=session.usage,
            memory=session.permissions,
            context_guard=TurnCompaction(self._compactor(session, log, host.emit), host.emit),
        )
        stop: TurnStopReason = "cancelled"
        failure: str | None = None
        try:
            async with channel.streaming():
                prompt = await mentions.read(message)
                message_id = uuid.uuid4().hex
                if inserted is not None:
                    await inserted(message_id)  # the engine keeps it first thing
                stop = await turn.run(prompt, message_id)
        except MentionsCancelled:
            stop = "cancelled"
        except Exception as exc:
            failure = failure_text(exc)
            raise
        finally:
            if unanswered(session.history):
                marker = no_reply_marker(failure, stop)
                host.keep(marker, None)
                session.history.append(marker)
            recorder.flush()
            self._record_turn_end(session, log, stop, remembered, failure)
            with anyio.CancelScope(shield=True), anyio.move_on_after(SYNC_SECONDS):
                await log.sync()
                await self._after_turn(session, log, channel)
        return stop

    def _record_turn_end(
        self,
        session: Session,
        log: LogWriter,
        stop: TurnStopReason,
        remembered: Any,
        failure: str | None,
    ) -> None:
        reading = session.usage.last
        log.append(
            UsageRecord(
                session.usage.cost_usd,
                reading.used if reading else None,
                reading.estimated if reading else False,
            )
        )
        if session.permissions.to_json() != remembered:
            memory = session.permissions.to_json()
            log.append(PermissionsRecord(tuple(memory["allowed"]), tuple(memory["rejected"])))
        if failure is not None:
            log.append(TurnEndRecord(TURN_FAILED, utc_now(), failure))
        else:
            log.append(TurnEndRecord(stop, utc_now()))

    async def _after_turn(self, session: Session, log: LogWriter, channel: SessionChannel) -> None:
        """The first turn names the session (and has the title model name it better, beside
        the turns); every turn marks it as active now."""
        if session.title is None and (title := first_prompt_title(session.history)) is not None:
            await _retitle(session, log, channel, title)
            if self.config.title_model is not None and self.background is not None:
                prompt = first_prompt_text(session.history)
                work = functools.partial(self._write_title, session, log, channel, prompt)
                self.background.start_soon(session.run_aside, work)
        else:
            await log.update_summary()

    async def _write_title(
        self, session: Session, log: LogWriter, channel: SessionChannel, prompt: str
    ) -> None:
        assert self.config.title_model is not None
        choice, _, model = self.config.find_model(self._title_model(session))
        title: str | None = None
        with anyio.move_on_after(TITLE_SECONDS):
            try:
                provider = await self.providers.get(choice.split("/", 1)[0])
                title = await generated_title(provider, model.id, prompt)
            except ProviderError as exc:
                logger.warning("title model %s: %s (the first prompt stays the title)", choice, exc)
        if title is None or log.closed or session.title_chosen:
            return  # the user's own title, set while the model wrote, stays
        await _retitle(session, log, channel, title)

    def _title_model(self, session: Session) -> str:
        """The configured title model, or the session's own while the editor has the
        title model's provider disabled."""
        assert self.config.title_model is not None
        provider = self.config.title_model.split("/", 1)[0]
        if self.providers.enabled(provider):
            return self.config.title_model
        logger.info(
            "title model %s: the editor disabled its provider; using %s",
            self.config.title_model,
            session.model_choice,
        )
        return session.model_choice

    def _tool_context(self, session: Session, channel: SessionChannel) -> ToolContext:
        # Questions go through the turn's own channel, which shows the text streamed so far
        # before the form.
        can_ask = "form" in self.link.elicitation_modes
        return ToolContext(
            ask_user=channel.elicit if can_ask else None,
            session_id=session.id,
            cwd=session.cwd,
            roots=session.roots,
            editor=self.link.editor(session.id),
            state=session.tool_state,
            shell_timeout=self.config.shell_timeout,
            client_shows_terminal_stream=self.link.shows_terminal_stream,
            background=self.background,
            # A background job's display outlives the turn: not through the turn's channel.
            report=self.link.channel(session.id).emit,
            child_env=child_environment(self.env, self.config),
            protected_files=_own_files(self.config, self.env),
            delegate=self._delegate(session),
            readable_elsewhere=tuple(
                skill.path.parent for skill in self.project.skills(session).skills
            ),
        )

    def offered_tools(self, session: Session) -> dict[str, Tool[Any]]:
        """The tools the model is offered in the session's mode, its MCP servers' included."""
        return tools_for_mode(self.session_tools(session), session.mode)

    def session_tools(self, session: Session) -> Mapping[str, Tool[Any]]:
        """Every tool of the session, whatever its mode: the built-in ones and its MCP
        servers' (read anew at every use); a subagent gets those its parent named, and
        `agent` only below the configured depth."""
        tools = self.servers.tools(session.servers_of, self.tools)
        may_delegate = self._may_delegate(session)
        allowed = session.allowed_tools
        if may_delegate and allowed is None:
            return tools
        return _ToolsView(
            tools,
            lambda name: (may_delegate or name != "agent") and (allowed is None or name in allowed),
        )

    def _may_delegate(self, session: Session) -> bool:
        return self.subagents is not None and session.depth < self.config.subagent_depth

    def _delegate(self, session: Session) -> Delegate | None:
        if self.subagents is None or not self._may_delegate(session):
            return None
        return self.subagents.delegate(self, session)

    async def model_setup(self, session: Session) -> ModelSetup:
        """The provider and settings for the session's next model request, from its current
        choices (read anew for each request, so a switch applies mid-turn)."""
        choice, provider_config, model = self.config.find_model(session.model_choice)
        provider = await self.providers.get(choice.split("/", 1)[0])
        session.usage.prices = model.prices  # a switch keeps the cost so far
        offered = self.offered_tools(session)
        system = self.project.system_prompt(
            session, tuple(offered), provider_config, model, session.usage.counter.count_text
        )
        return ModelSetup(
            provider,
            ModelSettings(
                model=model.id,
                system_prompt=system,
                context_window=model.context_window,
                max_output_tokens=model.max_output_tokens,
                thought_level=thought_level(self.config, session),
                speed=speed(self.config, session),
            ),
        )

    async def compact(self, session: Session, log: LogWriter, focus: str) -> bool:
        """The older turns summarised now (`/compact [focus]`); False when there was nothing
        to summarise."""
        setup = await self.model_setup(session)
        offered = self.offered_tools(session)
        compactor = self._compactor(session, log, self.link.channel(session.id).emit)
        try:
            outcome = await compactor.on_demand(
                setup, [tool.spec() for tool in offered.values()], focus or None
            )
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(SYNC_SECONDS):
                await log.sync()
        return outcome != "nothing"

    def _compactor(self, session: Session, log: LogWriter, emit: Emit) -> Compactor:
        policy = CompactionPolicy(
            self.config.compaction_threshold, self.config.compaction_keep_turns
        )
        return Compactor(session, log, policy, emit)


@dataclass(frozen=True)
class _ToolsView(Mapping[str, Tool[Any]]):
    """A session's tools as the mapping under it has them now, less those it may not use."""

    tools: Mapping[str, Tool[Any]]
    allowed: Callable[[str], bool]

    def __getitem__(self, name: str) -> Tool[Any]:
        if not self.allowed(name):
            raise KeyError(name)
        return self.tools[name]

    def __iter__(self) -> Iterator[str]:
        return (name for name in self.tools if self.allowed(name))

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True, slots=True)
class _LiveChoices:
    """`engine.SessionChoices` of one session: the engine reads them at every step."""

    runner: TurnRunner
    session: Session

    @property
    def mode(self) -> PermissionMode:
        return self.session.mode

    async def model_setup(self) -> ModelSetup:
        return await self.runner.model_setup(self.session)


@dataclass(slots=True)
class _TurnHost:
    """`engine.TurnHost` of one turn: events go to the log and to the editor.

    What is shown before the prompt joins the history (a mention's read the user is asked
    about) is logged right after it, so a loaded session shows the prompt first.
    """

    channel: SessionChannel
    recorder: TurnRecorder
    _before_prompt: list[TurnEvent] | None = field(default_factory=list)
    """None once the prompt is kept."""

    async def emit(self, event: TurnEvent) -> None:
        if self._before_prompt is None:
            self.recorder.observe(event)
        else:
            self._before_prompt.append(event)
        await self.channel.emit(event)

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        return await self.channel.ask_permission(question)

    def keep(self, message: Message, message_id: str | None) -> None:
        self.recorder.keep(message, message_id)
        held, self._before_prompt = self._before_prompt, None
        for event in held or ():
            self.recorder.observe(event)


async def _retitle(session: Session, log: LogWriter, channel: SessionChannel, title: str) -> None:
    session.title = title
    log.append(TitleRecord(title))
    summary = await log.update_summary(title=title)
    await channel.emit(SessionInfoChanged(title=title, updated_at=summary.updated_at))


def _own_files(config: AgentConfig, env: Mapping[str, str]) -> tuple[Path, ...]:
    """What a tool must never change without asking: the config file this agent runs with
    and the user's config directory (its config and the stored credentials)."""
    own = [user_config_path(env).parent]
    source = Path(config.source)  # or words: "built-in echo …", "environment (…)"
    if source.is_file():
        own.append(source.resolve())
    return tuple(own)
