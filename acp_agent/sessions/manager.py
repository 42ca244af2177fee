"""Every session's life: create, load, resume, fork, prompt, choose, cancel, close, delete.

The manager owns the live sessions and their logs in the store, and builds each prompt
turn: the provider and settings the session's choices name (read anew for every model
request), the tools, and a host that shows the turn's events to the editor through the
session's channel while the recorder writes them to the log.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..child_env import child_environment
from ..config import AgentConfig, ThoughtLevel
from ..engine import ModelSettings, ModelSetup, Turn, open_call_results
from ..messages import (
    Message,
    MessageChunk,
    SessionInfoChanged,
    TextPart,
    TurnEvent,
    TurnStopReason,
)
from ..providers.pool import ProviderPool
from ..providers.usage import Encoder, Reading, TokenCounter, UsageMeter
from ..tools import Decision, PermissionQuestion, Tool, ToolContext, builtin_tools
from ..tools.permissions import MODES, PermissionMode, is_mode
from .channel import EditorLink, SessionChannel
from .errors import SessionNotFound
from .recorder import TurnRecorder
from .records import (
    ChoiceRecord,
    MessageRecord,
    PermissionsRecord,
    SessionHeader,
    TitleRecord,
    TurnEndRecord,
    UsageRecord,
    utc_now,
)
from .restore import StoredSession, replay, restore
from .session import Session
from .store import SessionLog, SessionStore, SessionSummary, SummaryPage

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = """\
You are a coding agent working inside the user's editor. The working directory is {cwd}.
Use the tools to look at files before you answer questions about them; refer to files by \
absolute path. Be concise. Today is {today}."""

MODEL = "model"
THOUGHT_LEVEL = "thought_level"
MODE = "mode"
THOUGHT_LEVELS: tuple[ThoughtLevel, ...] = ("off", "low", "medium", "high")
MODEL_COMMAND = "model"
TITLE_CHARS = 60
SYNC_SECONDS = 2.0
CLOSE_SECONDS = 10.0
"""Time a closed session's cancelled turn has to finish before its log is closed."""
"""Time allowed to fsync a log at a turn's end (also when the turn was cancelled)."""
INTERRUPTED_RESULT = "Not run: the session ended before this tool call finished."


class UnknownSession(LookupError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"unknown session {session_id!r}")
        self.session_id = session_id


class ChoiceError(ValueError):
    """A choice the session cannot take; the message says which values it can."""


@dataclass(frozen=True, slots=True)
class PromptOutcome:
    stop_reason: TurnStopReason
    choices_changed: bool = False
    """A slash command changed the session's model (the editor's pickers need updating)."""


class SessionManager:
    def __init__(
        self,
        config: AgentConfig,
        link: EditorLink,
        providers: ProviderPool,
        store: SessionStore,
        *,
        env: Mapping[str, str],
        encoder: Encoder | None = None,
        background: TaskGroup | None = None,
        tools: Mapping[str, Tool[Any]] | None = None,
    ) -> None:
        self._config = config
        self._link = link
        self._providers = providers
        self._store = store
        self._env = env
        self._encoder = encoder
        self._background = background
        self._tools = dict(tools) if tools is not None else builtin_tools()
        self._sessions: dict[str, Session] = {}
        self._logs: dict[str, SessionLog] = {}

    # --- lifecycle -----------------------------------------------------------------------

    def new(self, cwd: Path, additional_roots: Sequence[Path] = ()) -> Session:
        session = self._session(f"sess_{uuid.uuid4().hex}", cwd, additional_roots)
        session_log = self._store.create(
            SessionHeader(
                session.id,
                str(cwd),
                tuple(str(root) for root in additional_roots),
                created_at=utc_now(),
            )
        )
        # The choices it starts with, so a later default does not change a stored session.
        session_log.append(ChoiceRecord(model=session.model_choice, mode=session.mode))
        self._add(session, session_log)
        log.info("session %s in %s using %s", session.id, cwd, session.model_choice)
        return session

    async def load(
        self, session_id: str, cwd: Path, additional_roots: Sequence[Path] = ()
    ) -> Session:
        """The stored session, live again, after the user has been shown its whole
        conversation (through the session's channel)."""
        session = await self.resume(session_id, cwd, additional_roots)
        records = await anyio.to_thread.run_sync(self._read, session_id)
        channel = self._link.channel(session_id)
        for event in replay(records):
            await channel.emit(event)
        return session

    async def resume(
        self, session_id: str, cwd: Path, additional_roots: Sequence[Path] = ()
    ) -> Session:
        """The stored session, live again without replay; the request's roots replace its
        roots. A session that is live already is returned as it is."""
        session = self._sessions.get(session_id)
        if session is None:
            records = await anyio.to_thread.run_sync(self._read, session_id)
            session = self._session(session_id, cwd, additional_roots, restore(records))
            self._add(session, self._store.open_log(session_id))
            self._close_open_tool_calls(session)
            log.info("session %s restored in %s using %s", session.id, cwd, session.model_choice)
        session.cwd, session.roots = cwd, (cwd, *additional_roots)
        return session

    async def fork(
        self, session_id: str, cwd: Path, additional_roots: Sequence[Path] = ()
    ) -> Session:
        """A new session holding a copy of the stored one's conversation; the original is
        left as it was."""
        source = self._sessions.get(session_id)
        if source is not None and source.busy:
            # Its running turn writes on; the copy takes what is written so far.
            log.info("forking %s while a turn runs", session_id)
        fork_id = f"sess_{uuid.uuid4().hex}"
        header = SessionHeader(
            fork_id,
            str(cwd),
            tuple(str(root) for root in additional_roots),
            created_at=utc_now(),
            forked_from=session_id,
        )
        try:
            fork_log = self._store.fork(session_id, header)
        except SessionNotFound:
            raise UnknownSession(session_id) from None
        records = await anyio.to_thread.run_sync(self._read, fork_id)
        session = self._session(fork_id, cwd, additional_roots, restore(records))
        self._add(session, fork_log)
        self._close_open_tool_calls(session)
        return session

    def summaries(self, cwd: Path | None = None, cursor: str | None = None) -> SummaryPage:
        """One page of the stored sessions, newest first; `ValueError` for a bad cursor."""
        return self._store.list(str(cwd) if cwd is not None else None, cursor)

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise UnknownSession(session_id)
        return session

    async def close(self, session_id: str) -> None:
        """Cancel the session's work and let it go from memory (it stays stored)."""
        session = self.get(session_id)
        session.cancel()
        del self._sessions[session_id]
        with anyio.move_on_after(CLOSE_SECONDS):
            await session.wait_idle()  # the cancelled turn writes its end to the log
        self._logs.pop(session_id).close()

    async def delete(self, session_id: str) -> None:
        """Close the session and remove it from the store; an unknown id is no error (the
        client wanted it gone)."""
        if session_id in self._sessions:
            await self.close(session_id)
        try:
            self._store.delete(session_id)
        except SessionNotFound:
            log.info("delete of unknown session %s: nothing to do", session_id)

    def summary(self, session_id: str) -> SessionSummary:
        return self._logs[session_id].summary

    def _read(self, session_id: str) -> list[Any]:
        try:
            return self._store.read(session_id)
        except SessionNotFound:
            raise UnknownSession(session_id) from None

    def _session(
        self,
        session_id: str,
        cwd: Path,
        additional_roots: Sequence[Path],
        stored: StoredSession | None = None,
    ) -> Session:
        session = Session(
            id=session_id,
            cwd=cwd,
            roots=(cwd, *additional_roots),
            model_choice=self._config.default_choice,
            usage=UsageMeter(counter=TokenCounter(self._encoder, encoding=None)),
        )
        if stored is not None:
            self._apply_stored(session, stored)
        return session

    def _apply_stored(self, session: Session, stored: StoredSession) -> None:
        session.history = stored.history
        session.permissions = stored.permissions
        session.title = stored.title
        if stored.model is not None:
            try:
                self._config.find_model(stored.model)
                session.model_choice = stored.model
            except ValueError:
                log.warning(
                    "session %s used %s, which the configuration no longer has; using %s",
                    session.id,
                    stored.model,
                    session.model_choice,
                )
        if stored.mode is not None and is_mode(stored.mode):
            session.mode = stored.mode
        if stored.thought_level in THOUGHT_LEVELS:
            session.thought_level = stored.thought_level
        if stored.usage is not None:
            session.usage.cost_usd = stored.usage.cost_usd
            if stored.usage.used is not None:
                session.usage.last = Reading(
                    stored.usage.used, stored.usage.cost_usd, stored.usage.estimated
                )

    def _add(self, session: Session, log: SessionLog) -> None:
        self._sessions[session.id] = session
        self._logs[session.id] = log

    def _close_open_tool_calls(self, session: Session) -> None:
        """A process killed while tools ran left calls without results: answer them."""
        results = open_call_results(session.history, [], INTERRUPTED_RESULT)
        if results is not None:
            session.history.append(results)
            self._logs[session.id].append(MessageRecord(results))

    def cancel(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            log.warning("cancel for unknown session %s ignored", session_id)
            return
        session.cancel()

    def cancel_all(self) -> None:
        for session in self._sessions.values():
            session.cancel()

    async def aclose(self) -> None:
        self.cancel_all()
        for log in self._logs.values():
            log.close()
        await self._providers.aclose()

    # --- prompts -------------------------------------------------------------------------

    def queue_prompt(self, session_id: str) -> int | None:
        """Called as a prompt's frame is read: its place in its session's queue, or None
        when no such session exists (the prompt then fails on its own)."""
        session = self._sessions.get(session_id)
        return session.take_place() if session is not None else None

    async def prompt(
        self, session_id: str, message: Message, place: int | None = None
    ) -> PromptOutcome:
        session = self.get(session_id)
        if (argument := _model_command(message)) is not None:
            return await self._model_command(session, argument)
        # The turn is built when its queue slot comes: a prompt that waited uses the
        # model and mode chosen meanwhile.
        stop = await session.run_turn(lambda: self._run_turn(session, message), place)
        return PromptOutcome(stop)

    async def _run_turn(self, session: Session, message: Message) -> TurnStopReason:
        # An unknown model or a provider that fails to load fails the prompt before it
        # joins the history.
        await self.model_setup(session)
        channel = self._link.channel(session.id)
        log = self._logs[session.id]
        recorder = TurnRecorder(log)
        remembered = session.permissions.to_json()
        turn = Turn(
            choices=_LiveChoices(self, session),
            history=session.history,
            tools=self._tools,
            context=self._tool_context(session),
            host=_TurnHost(channel, recorder),
            max_turn_requests=self._config.max_turn_requests,
            meter=session.usage,
            memory=session.permissions,
        )
        stop: TurnStopReason = "cancelled"
        try:
            async with channel.streaming():
                stop = await turn.run(message, uuid.uuid4().hex)
        finally:
            recorder.flush()
            self._record_turn_end(session, log, stop, remembered)
            with anyio.CancelScope(shield=True), anyio.move_on_after(SYNC_SECONDS):
                await log.sync()
                await self._after_turn(session, log, channel)
        return stop

    def _record_turn_end(
        self, session: Session, log: SessionLog, stop: TurnStopReason, remembered: Any
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
        log.append(TurnEndRecord(stop, utc_now()))

    async def _after_turn(self, session: Session, log: SessionLog, channel: SessionChannel) -> None:
        """The first turn names the session; every turn marks it as active now."""
        if session.title is None and (title := _title(session.history)) is not None:
            session.title = title
            log.append(TitleRecord(title))
            summary = await log.update_summary(title=title)
            await channel.emit(SessionInfoChanged(title=title, updated_at=summary.updated_at))
        else:
            await log.update_summary()

    def _tool_context(self, session: Session) -> ToolContext:
        return ToolContext(
            session_id=session.id,
            cwd=session.cwd,
            roots=session.roots,
            editor=self._link.editor(session.id),
            state=session.tool_state,
            shell_timeout=self._config.shell_timeout,
            client_shows_terminal_stream=self._link.shows_terminal_stream,
            background=self._background,
            child_env=child_environment(self._env, self._config),
        )

    async def model_setup(self, session: Session) -> ModelSetup:
        """The provider and settings for the session's next model request, from its current
        choices (read anew for each request, so a switch applies mid-turn)."""
        choice, _, model = self._config.find_model(session.model_choice)
        provider = await self._providers.get(choice.split("/", 1)[0])
        session.usage.prices = model.prices  # a switch keeps the cost so far
        system = self._config.system_prompt or DEFAULT_SYSTEM_PROMPT
        return ModelSetup(
            provider,
            ModelSettings(
                model=model.id,
                system_prompt=system.format(cwd=session.cwd, today=datetime.date.today()),
                context_window=model.context_window,
                max_output_tokens=model.max_output_tokens,
                thought_level=self.thought_level(session),
            ),
        )

    # --- choices -------------------------------------------------------------------------

    def thought_level(self, session: Session) -> ThoughtLevel | None:
        """The effort to ask for, or None when the session's model does not reason."""
        model = self._config.find_model(session.model_choice)[2]
        if not model.reasoning:
            return None
        return session.thought_level or model.thought_level

    def choose(self, session_id: str, option: str, value: str) -> Session:
        """Set one of the session's choices; it applies from the next model request (model,
        thought level) or tool call (mode), also in a running turn."""
        session = self.get(session_id)
        if option == MODEL:
            try:
                self._config.find_model(value)
            except ValueError as exc:
                raise ChoiceError(str(exc)) from None
            session.model_choice = value
            self._logs[session.id].append(ChoiceRecord(model=value))
        elif option == THOUGHT_LEVEL:
            if self.thought_level(session) is None:
                raise ChoiceError(f"{session.model_choice} has no thinking levels")
            if value not in THOUGHT_LEVELS:
                raise ChoiceError(f"thought_level must be one of {', '.join(THOUGHT_LEVELS)}")
            session.thought_level = value
            self._logs[session.id].append(ChoiceRecord(thought_level=value))
        elif option == MODE:
            if not is_mode(value):
                known = ", ".join(mode.id for mode in MODES)
                raise ChoiceError(f"unknown mode {value!r}; modes: {known}")
            session.mode = value
            self._logs[session.id].append(ChoiceRecord(mode=value))
        else:
            raise ChoiceError(f"unknown config option {option!r}")
        log.info("session %s: %s = %s", session.id, option, value)
        return session

    async def _model_command(self, session: Session, argument: str) -> PromptOutcome:
        """`/model` lists the models, `/model provider/model` switches; no model call."""
        if argument:
            self.choose(session.id, MODEL, argument)
            reply = f"Model set to {argument}."
        else:
            listed = "\n".join(
                f"- {choice}{'  (current)' if choice == session.model_choice else ''}"
                for choice, _, _ in self._config.model_choices()
            )
            reply = f"Models:\n{listed}\n\nSwitch with /model provider/model."
        await self._link.channel(session.id).emit(MessageChunk(reply))
        return PromptOutcome("end_turn", choices_changed=bool(argument))


@dataclass(frozen=True, slots=True)
class _LiveChoices:
    """`engine.SessionChoices` of one session: the engine reads them at every step."""

    manager: SessionManager
    session: Session

    @property
    def mode(self) -> PermissionMode:
        return self.session.mode

    async def model_setup(self) -> ModelSetup:
        return await self.manager.model_setup(self.session)


@dataclass(frozen=True, slots=True)
class _TurnHost:
    """`engine.TurnHost` of one turn: events go to the log and to the editor."""

    channel: SessionChannel
    recorder: TurnRecorder

    async def emit(self, event: TurnEvent) -> None:
        self.recorder.observe(event)
        await self.channel.emit(event)

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        return await self.channel.ask_permission(question)

    def keep(self, message: Message, message_id: str | None) -> None:
        self.recorder.keep(message, message_id)


def _title(history: Sequence[Message]) -> str | None:
    """The session's first prompt, cut to a short line."""
    first = next((m for m in history if m.role == "user"), None)
    text = " ".join(p.text for p in first.parts if isinstance(p, TextPart)) if first else ""
    words = " ".join(text.split())
    if not words:
        return None
    if len(words) <= TITLE_CHARS:
        return words
    cut = words[: TITLE_CHARS - 1].rsplit(" ", 1)[0] or words[: TITLE_CHARS - 1]
    return cut + "…"


def _model_command(message: Message) -> str | None:
    """The argument of a `/model` prompt ("" for none); None for any other prompt, which
    goes to the model as written (other slash text included)."""
    text = message.text.strip()
    if len(message.parts) != 1 or not text.startswith("/"):
        return None
    name, _, argument = text[1:].partition(" ")
    return argument.strip() if name == MODEL_COMMAND else None
