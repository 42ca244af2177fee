"""Every session's life: create, load, resume, fork, prompt, choose, cancel, close, delete.

The manager owns the live sessions (at most `max_live_sessions` of them, `live.py`), their
logs in the store and their MCP servers; it queues each prompt in its session, runs our
slash commands, and hands every other prompt to the `TurnRunner` (`turns.py`). A session
comes back from the store with its "always allow" answers only in the roots they were
given in.
"""

from __future__ import annotations

import gc
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..config import AgentConfig, ThoughtLevel
from ..engine import open_call_results
from ..mcp_bridge import McpPromptInfo, McpServerSpec
from ..messages import (
    CommandInfo,
    CommandsChanged,
    Message,
    MessageChunk,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolResultPart,
    TurnStopReason,
    UserMessageChunk,
)
from ..providers.pool import ProviderPool
from ..providers.usage import Encoder, Reading, TokenCounter, UsageMeter
from ..tools import Tool, builtin_tools
from ..tools.permissions import MODES, is_mode
from .channel import EditorLink
from .errors import SessionNotFound
from .live import Live, LiveSessions
from .records import (
    ChoiceRecord,
    EventRecord,
    MessageRecord,
    RootsRecord,
    SessionHeader,
    utc_now,
)
from .restore import StoredSession, permissions_in, replay, restore, same_roots
from .servers import McpError, McpServers, PromptUsageError
from .session import Session
from .store import SessionLog, SessionStore, SummaryPage
from .turns import TurnRunner

log = logging.getLogger(__name__)

MODEL = "model"
THOUGHT_LEVEL = "thought_level"
MODE = "mode"
THOUGHT_LEVELS: tuple[ThoughtLevel, ...] = ("off", "low", "medium", "high")
MODEL_COMMAND = "model"
MODE_COMMAND = "mode"
MCP_COMMAND = "mcp"
COMPACT_COMMAND = "compact"
HELP_COMMAND = "help"
OUR_COMMANDS = (MODEL_COMMAND, MODE_COMMAND, MCP_COMMAND, COMPACT_COMMAND, HELP_COMMAND)
CLOSE_SECONDS = 10.0
"""Time a closed session's cancelled turn has to finish before its log is closed."""
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
    """A slash command changed the session's model or mode (the editor's pickers need
    updating)."""
    mode_changed: bool = False
    """A slash command changed the session's mode (clients that know only modes are told)."""


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
        self._encoder = encoder
        self._live = LiveSessions(config.max_live_sessions)
        self._opening: dict[str, anyio.Event] = {}
        """Sessions being opened from the store, set when done."""
        self._servers = McpServers(config, link, env, background, self.announce_commands)
        self._runner = TurnRunner(
            config,
            link,
            providers,
            self._servers,
            # ask_user only where the editor can show its form.
            dict(tools)
            if tools is not None
            else builtin_tools(ask_user="form" in link.elicitation_modes),
            env=env,
            background=background,
        )

    # --- lifecycle -----------------------------------------------------------------------

    async def new(
        self,
        cwd: Path,
        additional_roots: Sequence[Path] = (),
        mcp_servers: Sequence[McpServerSpec] = (),
    ) -> Session:
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
        session_log.append(_roots_record(session))
        self._live.add(session, session_log, mcp_servers)
        log.info("session %s in %s using %s", session.id, cwd, session.model_choice)
        with self._live.using(session.id):
            await self._servers.connect(session, mcp_servers)
            await self._let_go_over_limit()
        return session

    async def load(
        self,
        session_id: str,
        cwd: Path,
        additional_roots: Sequence[Path] = (),
        mcp_servers: Sequence[McpServerSpec] = (),
    ) -> Session:
        """The stored session, live again, after the user has been shown its whole
        conversation (through the session's channel)."""
        session = await self._open(session_id, cwd, additional_roots, mcp_servers)
        with self._live.using(session.id):
            await self._connect(session, mcp_servers)
            records = await anyio.to_thread.run_sync(self._read, session_id)
            channel = self._link.channel(session_id)
            for event in replay(records):
                await channel.emit(event)
            session.commands_shown = None  # the client shows the session afresh: tell it again
            await self._let_go_over_limit()
        return session

    async def resume(
        self,
        session_id: str,
        cwd: Path,
        additional_roots: Sequence[Path] = (),
        mcp_servers: Sequence[McpServerSpec] = (),
    ) -> Session:
        """The stored session, live again without replay; the request's roots replace its
        roots. A session that is live already is returned as it is."""
        session = await self._open(session_id, cwd, additional_roots, mcp_servers)
        with self._live.using(session.id):
            await self._connect(session, mcp_servers)
            await self._let_go_over_limit()
        return session

    async def fork(
        self,
        session_id: str,
        cwd: Path,
        additional_roots: Sequence[Path] = (),
        mcp_servers: Sequence[McpServerSpec] = (),
    ) -> Session:
        """A new session holding a copy of the stored one's conversation; the original is
        left as it was (and may be open in another process meanwhile)."""
        source = self._live.get(session_id)
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
        stored = restore(records)
        session = self._session(fork_id, cwd, additional_roots, stored)
        self._note_roots(session, fork_log, stored)
        self._close_open_tool_calls(session, fork_log, records)
        self._live.add(session, fork_log, mcp_servers)
        with self._live.using(session.id):
            await self._servers.connect(session, mcp_servers)
            await self._let_go_over_limit()
        return session

    def summaries(self, cwd: Path | None = None, cursor: str | None = None) -> SummaryPage:
        """One page of the stored sessions, newest first; `ValueError` for a bad cursor."""
        return self._store.list(str(cwd) if cwd is not None else None, cursor)

    def get(self, session_id: str) -> Session:
        """The live session (one let go is not live: `UnknownSession`)."""
        session = self._live.get(session_id)
        if session is None:
            raise UnknownSession(session_id)
        return session

    async def close(self, session_id: str) -> None:
        """Cancel the session's work and let it go from memory (it stays stored)."""
        session = self._live.get(session_id)
        if session is None:
            parked = self._live.unpark(session_id)
            if parked is None:
                raise UnknownSession(session_id)
            await parked.closed.wait()  # closed by now, or soon: a load after this may open it
            return
        session.cancel()
        entry = self._live.remove(session_id)
        with anyio.move_on_after(CLOSE_SECONDS):
            await session.wait_idle()  # the cancelled turn writes its end to the log
            await session.end_aside()
        await self._release(entry)

    async def delete(self, session_id: str) -> None:
        """Close the session and remove it from the store; an unknown id is no error (the
        client wanted it gone). `SessionLocked` if another process has it open."""
        if self._live.get(session_id) is not None or self._live.parked(session_id) is not None:
            await self.close(session_id)
        try:
            self._store.delete(session_id)
        except SessionNotFound:
            log.info("delete of unknown session %s: nothing to do", session_id)

    # --- live sessions -------------------------------------------------------------------

    async def _open(
        self,
        session_id: str,
        cwd: Path,
        additional_roots: Sequence[Path],
        mcp_servers: Sequence[McpServerSpec],
    ) -> Session:
        """The session live in these roots: as it is, or from the store."""
        session = self._live.get(session_id)
        if session is None:
            return await self._from_store(session_id, cwd, additional_roots, mcp_servers)
        roots = (cwd, *additional_roots)
        moved = not same_roots(_root_strings(roots), _root_strings(session.roots))
        session.cwd, session.roots = cwd, roots
        if moved:
            if session.permissions.allowed:
                log.info("session %s: new roots, its always-allow answers are dropped", session_id)
                session.permissions.allowed.clear()  # in place: a running turn holds it
            self._live.log(session_id).append(_roots_record(session))
        return session

    async def _use(self, session_id: str) -> Session:
        """The live session, opened again as it was if it was let go."""
        session = self._live.get(session_id)
        if session is not None:
            return session
        parked = self._live.parked(session_id)
        if parked is None:
            raise UnknownSession(session_id)
        return await self._from_store(
            session_id, parked.cwd, parked.additional_roots, parked.mcp_servers, again=True
        )

    async def _from_store(
        self,
        session_id: str,
        cwd: Path,
        additional_roots: Sequence[Path],
        mcp_servers: Sequence[McpServerSpec],
        *,
        again: bool = False,
    ) -> Session:
        """The stored session opened in this process (once, however many requests ask at
        the same time; it is live only once it is ready, so they run in their order).
        `again`: it was let go, and comes back as it was, with its servers, unasked."""
        while (opening := self._opening.get(session_id)) is not None:
            await opening.wait()
            if (session := self._live.get(session_id)) is not None:
                return session
        done = self._opening[session_id] = anyio.Event()
        try:
            return await self._restore(session_id, cwd, additional_roots, mcp_servers, again)
        finally:
            del self._opening[session_id]
            done.set()

    async def _restore(
        self,
        session_id: str,
        cwd: Path,
        additional_roots: Sequence[Path],
        mcp_servers: Sequence[McpServerSpec],
        again: bool,
    ) -> Session:
        parked = self._live.parked(session_id)
        if parked is not None:
            await parked.closed.wait()  # its log is ours to open once it is closed
        records = await anyio.to_thread.run_sync(self._read, session_id)
        stored = restore(records)
        session = self._session(session_id, cwd, additional_roots, stored)
        try:
            session_log = self._store.open_log(session_id)
        except SessionNotFound:
            raise UnknownSession(session_id) from None
        try:
            self._note_roots(session, session_log, stored)
            self._close_open_tool_calls(session, session_log, records)
            if parked is not None:  # prompts and cancels read meanwhile keep their meaning
                session.tickets, session.commands_shown = parked.tickets, parked.commands_shown
            if again:
                await self._servers.connect(session, mcp_servers)
                await self._announce(session)
            if parked is not None and self._live.unpark(session_id) is None:
                raise UnknownSession(session_id)  # closed while it was being opened
        except BaseException:
            session_log.close()
            with anyio.CancelScope(shield=True):
                await self._servers.close(session_id)
            raise
        self._live.add(session, session_log, mcp_servers)
        gc.freeze()  # a long history lives on: full collections need not walk it again
        log.info("session %s restored in %s using %s", session.id, cwd, session.model_choice)
        return session

    async def _connect(self, session: Session, mcp_servers: Sequence[McpServerSpec]) -> None:
        await self._servers.connect(session, mcp_servers)
        self._live.set_servers(session.id, mcp_servers)

    async def _let_go_over_limit(self) -> None:
        """Close the least recently used idle sessions past the limit, as `close` does;
        they stay stored and open again when their id is used."""
        while (session_id := self._live.next_to_let_go()) is not None:
            entry, parked = self._live.park(session_id)
            log.debug("session %s let go (%d live)", session_id, len(self._live))
            try:
                await self._release(entry)
            finally:
                parked.closed.set()

    async def _release(self, entry: Live) -> None:
        entry.log.close()
        await self._servers.close(entry.session.id)

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
        session.permissions = permissions_in(stored, _root_strings(session.roots), session.id)
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
        session.summarised = stored.summarised
        if stored.usage is not None:
            session.usage.cost_usd = stored.usage.cost_usd
            if stored.usage.used is not None:
                session.usage.last = Reading(
                    stored.usage.used, stored.usage.cost_usd, stored.usage.estimated
                )
                session.usage.messages = len(stored.history)

    @staticmethod
    def _note_roots(session: Session, session_log: SessionLog, stored: StoredSession) -> None:
        """Record the roots the session works in now, when the log says otherwise: the
        answers given from here on are tied to them."""
        if stored.roots is None or not same_roots(stored.roots, _root_strings(session.roots)):
            session_log.append(_roots_record(session))

    def _close_open_tool_calls(
        self, session: Session, session_log: SessionLog, records: Sequence[Any]
    ) -> None:
        """A process killed while tools ran left calls without results: answer them, and
        end the calls the user saw start (a load would show them running forever)."""
        results = open_call_results(session.history, [], INTERRUPTED_RESULT)
        if results is None:
            return
        session_log.append(MessageRecord(results))  # stored first: memory holds only what was
        session.history.append(results)
        shown = {
            r.event.id
            for r in records
            if isinstance(r, EventRecord) and isinstance(r.event, ToolCallStarted)
        }
        for result in results.parts:
            if isinstance(result, ToolResultPart) and result.tool_call_id in shown:
                ended = ToolCallUpdated(
                    result.tool_call_id, status="failed", content=(TextPart(INTERRUPTED_RESULT),)
                )
                session_log.append(EventRecord(ended))

    def cancel(self, session_id: str) -> None:
        session = self._live.get(session_id)
        parked = self._live.parked(session_id)
        if session is not None:
            session.cancel()
        elif parked is not None:
            parked.tickets.cancel()
        else:
            log.warning("cancel for unknown session %s ignored", session_id)

    def cancel_all(self) -> None:
        for entry in self._live:
            entry.session.cancel()
        for parked in self._live.parked_sessions():
            parked.tickets.cancel()

    async def aclose(self) -> None:
        self.cancel_all()
        for entry in self._live:
            entry.log.close()
        await self._servers.aclose()
        await self._providers.aclose()

    # --- prompts -------------------------------------------------------------------------

    def queue_prompt(self, session_id: str) -> int | None:
        """Called as a prompt's frame is read: its place in its session's queue, or None
        when no such session exists (the prompt then fails on its own)."""
        session = self._live.get(session_id)
        if session is not None:
            return session.take_place()
        parked = self._live.parked(session_id)  # it keeps its place while let go
        return parked.tickets.take() if parked is not None else None

    async def prompt(
        self, session_id: str, message: Message, place: int | None = None
    ) -> PromptOutcome:
        session = await self._use(session_id)
        with self._live.using(session_id):
            command = _command(message)
            if command is not None and (outcome := await self._command(session, *command, place)):
                return outcome
            # The turn is built when its queue slot comes: a prompt that waited uses the
            # model and mode chosen meanwhile.
            stop = await session.run_turn(lambda: self._run_turn(session, message), place)
            return PromptOutcome(stop)

    async def _run_turn(self, session: Session, message: Message) -> TurnStopReason:
        return await self._runner.run(session, self._live.log(session.id), message)

    # --- choices -------------------------------------------------------------------------

    def thought_level(self, session: Session) -> ThoughtLevel | None:
        """The effort to ask for, or None when the session's model does not reason."""
        return self._runner.thought_level(session)

    async def choose(self, session_id: str, option: str, value: str) -> Session:
        """Set one of the session's choices; it applies from the next model request (model,
        thought level) or tool call (mode), also in a running turn."""
        session = await self._use(session_id)
        self._choose(session, option, value)
        return session

    def _choose(self, session: Session, option: str, value: str) -> None:
        session_log = self._live.log(session.id)
        if option == MODEL:
            try:
                self._config.find_model(value)
            except ValueError as exc:
                raise ChoiceError(str(exc)) from None
            session.model_choice = value
            session_log.append(ChoiceRecord(model=value))
        elif option == THOUGHT_LEVEL:
            if self.thought_level(session) is None:
                raise ChoiceError(f"{session.model_choice} has no thinking levels")
            if value not in THOUGHT_LEVELS:
                raise ChoiceError(f"thought_level must be one of {', '.join(THOUGHT_LEVELS)}")
            session.thought_level = value
            session_log.append(ChoiceRecord(thought_level=value))
        elif option == MODE:
            if not is_mode(value):
                known = ", ".join(mode.id for mode in MODES)
                raise ChoiceError(f"unknown mode {value!r}; modes: {known}")
            session.mode = value
            session_log.append(ChoiceRecord(mode=value))
        else:
            raise ChoiceError(f"unknown config option {option!r}")
        log.info("session %s: %s = %s", session.id, option, value)

    # --- slash commands ------------------------------------------------------------------

    def commands(self, session_id: str) -> tuple[CommandInfo, ...]:
        """What the user may type as `/name argument`: ours, then the MCP servers' prompts."""
        ours = (
            CommandInfo(
                MODEL_COMMAND, "Switch the model (no argument: list the models)", "provider/model"
            ),
            CommandInfo(
                MODE_COMMAND,
                "Switch what the agent may do without asking (no argument: list the modes)",
                " | ".join(mode.id for mode in MODES),
            ),
            CommandInfo(MCP_COMMAND, "Show the MCP servers, their state and tools"),
            CommandInfo(
                COMPACT_COMMAND,
                "Summarise the older turns to free context (optionally: what to keep in focus)",
                "focus (optional)",
            ),
            CommandInfo(HELP_COMMAND, "List the commands"),
        )
        prompts = tuple(
            CommandInfo(
                info.command,
                info.description or info.title or f"MCP prompt {info.name} of {info.server}",
                " ".join(a.name for a in info.arguments) or None,
            )
            for info in self._servers.prompts(session_id)
        )
        return ours + prompts

    async def announce_commands(self, session_id: str) -> None:
        """Tell the editor the session's commands (once it knows the session, and when the
        servers' prompts change), then what its servers did meanwhile."""
        session = self._live.get(session_id)
        if session is not None:
            await self._announce(session)

    async def _announce(self, session: Session) -> None:
        commands = self.commands(session.id)
        if commands != session.commands_shown:
            session.commands_shown = commands
            await self._link.channel(session.id).emit(CommandsChanged(commands))
        await self._servers.announce(session.id)

    async def _command(
        self, session: Session, name: str, argument: str, place: int | None
    ) -> PromptOutcome | None:
        """Run a slash command; None when `name` is none of ours (the text goes to the model)."""
        if name in OUR_COMMANDS:
            # Not for the model, but shown again when the session is loaded.
            typed = TextPart(f"/{name} {argument}".rstrip())
            self._live.log(session.id).append(EventRecord(UserMessageChunk(typed, _new_id())))
        if name == MODEL_COMMAND:
            return await self._model_command(session, argument)
        if name == MODE_COMMAND:
            return await self._mode_command(session, argument)
        if name == HELP_COMMAND:
            await self._reply(session, self._help(session.id))
            return PromptOutcome("end_turn")
        if name == MCP_COMMAND:
            await self._reply(session, self._servers.describe(session.id))
            return PromptOutcome("end_turn")
        if name == COMPACT_COMMAND:
            return PromptOutcome(
                await session.run_turn(lambda: self._compact(session, argument), place)
            )
        prompt = next((p for p in self._servers.prompts(session.id) if p.command == name), None)
        if prompt is None:
            return None
        # In its place in the queue from the start: a later prompt or a cancel read after
        # it cannot overtake it while its messages are fetched.
        return PromptOutcome(
            await session.run_turn(lambda: self._prompt_turn(session, prompt, argument), place)
        )

    async def _prompt_turn(
        self, session: Session, prompt: McpPromptInfo, argument: str
    ) -> TurnStopReason:
        """An MCP prompt, in its place in the queue: its messages are fetched when its turn
        comes; the last user message is the prompt, what comes before it joins the history
        first."""
        try:
            messages = await self._servers.prompt_messages(session.id, prompt, argument)
        except (PromptUsageError, McpError) as exc:
            await self._reply(session, f"/{prompt.command}: {exc}")
            return "end_turn"
        *earlier, last = messages or (Message("user", [TextPart("(the prompt was empty)")]),)
        if last.role != "user":
            earlier, last = [*earlier, last], Message("user", [TextPart("Go on.")])
        for message in earlier:
            self._live.log(session.id).append(MessageRecord(message))
            session.history.append(message)
        return await self._run_turn(session, last)

    async def _compact(self, session: Session, focus: str) -> TurnStopReason:
        """`/compact [focus]`, in the session's queue: the older turns summarised now."""
        if not await self._runner.compact(session, self._live.log(session.id), focus):
            await self._reply(session, "Nothing to compact: no turns since the last summary.")
        return "end_turn"

    async def _reply(self, session: Session, text: str) -> None:
        """An answer of ours (not the model's), kept for the session's replay."""
        reply = MessageChunk(text, _new_id())
        self._live.log(session.id).append(EventRecord(reply))
        await self._link.channel(session.id).emit(reply)

    async def _model_command(self, session: Session, argument: str) -> PromptOutcome:
        """`/model` lists the models, `/model provider/model` switches; no model call. An
        unknown model is answered with the list, as a reply: the prompt did not fail."""
        listed = "\n".join(
            f"- {choice}{'  (current)' if choice == session.model_choice else ''}"
            for choice, _, _ in self._config.model_choices()
        )
        listing = f"Models:\n{listed}\n\nSwitch with /model provider/model."
        if not argument:
            await self._reply(session, listing)
            return PromptOutcome("end_turn")
        try:
            self._choose(session, MODEL, argument)
        except ChoiceError:
            await self._reply(session, f"There is no model {argument!r}.\n\n{listing}")
            return PromptOutcome("end_turn")
        await self._reply(session, f"Model set to {argument}.")
        return PromptOutcome("end_turn", choices_changed=True)

    async def _mode_command(self, session: Session, argument: str) -> PromptOutcome:
        """`/mode` lists the modes, `/mode id` switches (from the next tool call, also in a
        running turn); an unknown mode is answered with the list."""
        listed = "\n".join(
            f"- {mode.id}: {mode.description}{'  (current)' if mode.id == session.mode else ''}"
            for mode in MODES
        )
        listing = f"Modes:\n{listed}\n\nSwitch with /mode id."
        if not argument:
            await self._reply(session, listing)
            return PromptOutcome("end_turn")
        try:
            self._choose(session, MODE, argument)
        except ChoiceError:
            await self._reply(session, f"There is no mode {argument!r}.\n\n{listing}")
            return PromptOutcome("end_turn")
        name = next(mode.name for mode in MODES if mode.id == session.mode)
        await self._reply(session, f"Mode set to {name} ({session.mode}).")
        return PromptOutcome("end_turn", choices_changed=True, mode_changed=True)

    def _help(self, session_id: str) -> str:
        lines = [
            f"- /{c.name}{f' {c.hint}' if c.hint else ''}: {c.description}"
            for c in self.commands(session_id)
        ]
        return "Commands:\n" + "\n".join(lines)


def _new_id() -> str:
    return uuid.uuid4().hex


def _root_strings(roots: Sequence[Path]) -> tuple[str, ...]:
    return tuple(str(root) for root in roots)


def _roots_record(session: Session) -> RootsRecord:
    return RootsRecord(str(session.cwd), _root_strings(session.additional_roots))


def _command(message: Message) -> tuple[str, str] | None:
    """(name, argument) of a prompt that is one `/name argument` line of text; None for any
    other prompt."""
    text = message.text.strip()
    if len(message.parts) != 1 or not text.startswith("/") or "\n" in text:
        return None
    name, _, argument = text[1:].partition(" ")
    return (name, argument.strip()) if name else None
