"""A session's life in this process: new, load, resume, fork, close, delete, list.

Sessions are live in a bounded set (`live.py`): past the limit the least recently used
idle one is let go, and it opens again from the store, as it was, when its id is used. A
stored session comes back with its "always allow" answers only in the roots they were
given in, and a process killed while tools ran has those calls answered as not run.
"""

from __future__ import annotations

import gc
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

import anyio

from ..config import AgentConfig
from ..mcp_bridge import McpServerSpec
from ..messages import (
    EditorPrompt,
    SessionInfoChanged,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolResultPart,
    open_call_results,
)
from ..providers.usage import Encoder, Reading, TokenCounter, UsageMeter
from .channel import EditorLink
from .choices import MODEL, Choices
from .errors import ChoiceError, SessionNotFound, UnknownSession
from .live import Live, LiveSessions
from .records import (
    ArchiveRecord,
    ChoiceRecord,
    EditorPromptRecord,
    EventRecord,
    Record,
    RootsRecord,
    SessionHeader,
    TitleRecord,
    utc_now,
)
from .restore import StoredSession, permissions_in, replay, restore, same_roots
from .servers import McpServers
from .session import Session
from .store import SessionLog, SessionStore, SessionSummary, SummaryPage

log = logging.getLogger(__name__)

CLOSE_SECONDS = 10.0
"""Time a closed session's cancelled turn has to finish before its log is closed."""
INTERRUPTED_RESULT = "Not run: the session ended before this tool call finished."

Announce = Callable[[Session], Awaitable[None]]
ArchiveFilter: TypeAlias = Literal["exclude", "include", "only"]
"""Which sessions a listing shows by their archive state."""
USER_TITLE_CHARS = 200
"""A title the user gives is kept to this many characters (whitespace runs made one)."""


@dataclass(frozen=True, slots=True)
class SessionState:
    """What `status` tells of a session, without touching it."""

    open: bool
    """Live in this process (False: stored, opened again on its next use)."""
    busy: bool
    """A turn runs (only ever for an open one)."""


@dataclass(frozen=True, slots=True)
class Where:
    """Where a request opens a session: its working directory, the other roots, and the
    MCP servers the editor gives it."""

    cwd: Path
    additional_roots: tuple[Path, ...] = ()
    mcp_servers: tuple[McpServerSpec, ...] = ()

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.cwd, *self.additional_roots)


@dataclass(eq=False)
class Lifecycle:
    """Every session's life in this process."""

    config: AgentConfig
    link: EditorLink
    store: SessionStore
    live: LiveSessions
    servers: McpServers
    choices: Choices
    """Gives a stored session its choices back."""
    announce: Announce
    """Tells the editor a session's commands (when one let go comes back)."""
    encoder: Callable[[], Encoder | None]
    """Gives the tokenizer that counts a session's tokens, on its first count (None:
    estimated from its characters)."""
    _opening: dict[str, anyio.Event] = field(default_factory=dict, init=False, repr=False)
    """Sessions being opened from the store, set when done."""

    async def new(
        self,
        where: Where,
        *,
        editor_prompt: EditorPrompt | None = None,
        origin: str | None = None,
    ) -> Session:
        """`origin`: what opened it, kept in its header (`ORIGIN_RUN` for `acp-agent run`)."""
        session = self._session(f"sess_{uuid.uuid4().hex}", where)
        header = _header(session.id, where, origin=origin)
        entry = Live(session, self.store.create(header), where.mcp_servers)
        # The choices it starts with, so a later default does not change a stored session.
        entry.writer.append(ChoiceRecord(model=session.model_choice, mode=session.mode))
        entry.writer.append(_roots_record(session))
        _keep_editor_prompt(entry, editor_prompt)
        entry.mark_fresh()  # what it holds now is what every new session holds
        log.info("session %s in %s using %s", session.id, where.cwd, session.model_choice)
        await self._go_live(entry)
        return session

    async def reopen(
        self,
        session_id: str,
        where: Where,
        *,
        replay_history: bool,
        editor_prompt: EditorPrompt | None = None,
    ) -> Session:
        """The stored session, live again (`session/load`, `session/resume`); the request's
        roots replace its roots, and its editor prompt the stored one (none given: the
        stored one stays). A session that is live already is taken as it is.
        `replay_history`: the user is shown its whole conversation first (through the
        session's channel)."""
        session = await self._open(session_id, where)
        _keep_editor_prompt(self.get(session.id), editor_prompt)
        with self.live.using(session.id):
            await self.servers.connect(session, where.mcp_servers)
            self.live.set_servers(session.id, where.mcp_servers)
            if replay_history:
                await self._replay(session)
            await self._let_go_over_limit()
        return session

    async def fork(
        self,
        session_id: str,
        where: Where,
        *,
        editor_prompt: EditorPrompt | None = None,
        choices: Sequence[tuple[str, str]] = (),
    ) -> Session:
        """A new session holding a copy of the stored one's conversation (and its editor
        prompt, unless the request gives one); the original is left as it was (and may be
        open in another process meanwhile). The copy takes `choices` (option, value); one
        it cannot take is a `ChoiceError` naming the option, and the copy is gone again."""
        source = self.live.get(session_id)
        if source is not None and source.session.busy:
            # Its running turn writes on; the copy takes what is written so far.
            log.info("forking %s while a turn runs", session_id)
        fork_id = f"sess_{uuid.uuid4().hex}"
        try:
            fork_log = self.store.fork(session_id, _header(fork_id, where, forked_from=session_id))
        except SessionNotFound:
            raise UnknownSession(session_id) from None
        records = await anyio.to_thread.run_sync(self._read, fork_id)
        stored = restore(records)
        entry = Live(self._session(fork_id, where, stored), fork_log, where.mcp_servers)
        _note_roots(entry, stored)
        _close_open_tool_calls(entry, records)
        _keep_editor_prompt(entry, editor_prompt)
        await self._go_live(entry)
        try:
            self._choose_all(entry, choices)
        except Exception:  # nothing forked, as far as the client can tell
            await self.delete(fork_id)
            raise
        return entry.session

    def _choose_all(self, entry: Live, choices: Sequence[tuple[str, str]]) -> None:
        # The model first, as the thought levels offered depend on it.
        for option, value in sorted(choices, key=lambda choice: choice[0] != MODEL):
            try:
                self.choices.choose(entry, option, value)
            except ChoiceError as exc:
                raise ChoiceError(f"configOptions: {option}: {exc}") from None

    def summaries(
        self,
        cwd: Path | None = None,
        cursor: str | None = None,
        archived: ArchiveFilter = "exclude",
    ) -> SummaryPage:
        """One page of the stored sessions, newest first, the archived ones as `archived`
        says; `ValueError` for a bad cursor.

        A session that never got a prompt (no title) is listed only while it is open here:
        a chat client that opens one per window would fill its resume list with bare ids.
        It stays stored (a client may have named it to use later, as acpx does) until the
        start-up sweep removes it (`retention.EMPTY_GRACE`)."""

        def shown(summary: SessionSummary) -> bool:
            if archived != "include" and summary.archived != (archived == "only"):
                return False
            return summary.title is not None or self.live.get(summary.session_id) is not None

        return self.store.list(str(cwd) if cwd is not None else None, cursor, shown=shown)

    # --- what a session is called, and whether it is listed -------------------------------

    async def set_title(self, session_id: str, title: str) -> str:
        """Name the session as the user says (stored before this returns); no automatic
        title replaces it. Returns the title as kept (whitespace runs made one, cut to
        `USER_TITLE_CHARS`); `ChoiceError` for one with no words. Any stored session can be
        named, open here or not."""
        kept = " ".join(title.split())[:USER_TITLE_CHARS].rstrip()
        if not kept:
            raise ChoiceError("title: is empty (after trimming whitespace)")
        record = TitleRecord(kept, chosen=True)
        entry = self.live.get(session_id)
        if entry is None:
            await self._amend_stored(session_id, record, title=kept)
            return kept
        entry.session.title, entry.session.title_chosen = kept, True
        entry.writer.append(record)
        summary = await entry.writer.update_summary(title=kept)
        await self.link.channel(session_id).emit(
            SessionInfoChanged(title=kept, updated_at=summary.updated_at)
        )
        return kept

    async def archive(self, session_id: str) -> None:
        """Hide the session from default listings; an open one is closed first (its work
        cancelled, as `close`). Archiving an archived session changes nothing."""
        if self.live.get(session_id) is not None or self.live.parked(session_id) is not None:
            await self.close(session_id)
        await self._amend_stored(session_id, ArchiveRecord(archived=True), archived=True)

    async def unarchive(self, session_id: str) -> None:
        """List the session again; it is not opened."""
        record = ArchiveRecord(archived=False)
        entry = self.live.get(session_id)
        if entry is None:
            await self._amend_stored(session_id, record, archived=False)
            return
        entry.writer.append(record)  # resumed while archived
        await entry.writer.update_summary(archived=False)

    def status(self, session_id: str) -> SessionState:
        """Whether the session is open here and working; nothing about it changes."""
        entry = self.live.get(session_id)
        if entry is not None:
            return SessionState(open=True, busy=entry.session.busy)
        if self.live.parked(session_id) is not None or self.store.exists(session_id):
            return SessionState(open=False, busy=False)
        raise UnknownSession(session_id)

    async def _amend_stored(self, session_id: str, record: Record, **summary: Any) -> None:
        """One record for a session not open here, its log opened just for it."""
        parked = self.live.parked(session_id)
        if parked is not None:
            await parked.closed.wait()  # its log is free to open once it is closed
        try:
            # At once, no await: a request opening the session meanwhile waits its turn.
            self.store.amend(session_id, record, **summary)
        except SessionNotFound:
            raise UnknownSession(session_id) from None

    def get(self, session_id: str) -> Live:
        """The live session (one let go is not live: `UnknownSession`)."""
        entry = self.live.get(session_id)
        if entry is None:
            raise UnknownSession(session_id)
        return entry

    async def use(self, session_id: str) -> Live:
        """The live session, opened again as it was if it was let go."""
        entry = self.live.get(session_id)
        if entry is not None:
            return entry
        parked = self.live.parked(session_id)
        if parked is None:
            raise UnknownSession(session_id)
        where = Where(parked.cwd, parked.additional_roots, parked.mcp_servers)
        return await self._from_store(session_id, where, again=True)

    async def close(self, session_id: str) -> None:
        """Cancel the session's work and let it go from memory (it stays stored)."""
        entry = self.live.get(session_id)
        if entry is None:
            parked = self.live.unpark(session_id)
            if parked is None:
                raise UnknownSession(session_id)
            await parked.closed.wait()  # closed by now, or soon: a load after this may open it
            return
        entry.session.cancel()
        self.live.remove(session_id)
        with anyio.move_on_after(CLOSE_SECONDS):
            await entry.session.wait_idle()  # the cancelled turn writes its end to the log
            await entry.session.end_aside()
        await self._release(entry)
        for child_id in entry.session.children:  # its subagents end with it
            if self.live.get(child_id) is not None or self.live.parked(child_id) is not None:
                await self.close(child_id)

    async def delete(self, session_id: str) -> None:
        """Close the session and remove it from the store; an unknown id is no error (the
        client wanted it gone). `SessionLocked` if another process has it open."""
        if self.live.get(session_id) is not None or self.live.parked(session_id) is not None:
            await self.close(session_id)
        try:
            self.store.delete(session_id)
        except SessionNotFound:
            log.info("delete of unknown session %s: nothing to do", session_id)

    async def aclose(self) -> None:
        async with anyio.create_task_group() as group:  # every session's jobs killed at once
            for entry in self.live:
                group.start_soon(entry.session.tool_state.jobs.close)
        for entry in self.live:
            entry.close()
            await self.servers.aclose()

    async def _go_live(self, entry: Live) -> None:
        """A session new to this process joins the live ones, its servers connecting."""
        self.live.add(entry)
        with self.live.using(entry.session.id):
            await self.servers.connect(entry.session, entry.mcp_servers)
            await self._let_go_over_limit()

    async def _replay(self, session: Session) -> None:
        records = await anyio.to_thread.run_sync(self._read, session.id)
        channel = self.link.channel(session.id)
        for event in replay(records):
            await channel.emit(event)
        session.commands_shown = None  # the client shows the session afresh: tell it again

    # --- opening from the store ----------------------------------------------------------

    async def _open(self, session_id: str, where: Where) -> Session:
        """The session live in these roots: as it is, or from the store."""
        entry = self.live.get(session_id)
        if entry is None:
            return (await self._from_store(session_id, where)).session
        session = entry.session
        moved = not same_roots(_root_strings(where.roots), _root_strings(session.roots))
        session.cwd, session.roots = where.cwd, where.roots
        if moved:
            if session.permissions.allowed:
                log.info("session %s: new roots, its always-allow answers are dropped", session_id)
                session.permissions.allowed.clear()  # in place: a running turn holds it
            entry.writer.append(_roots_record(session))
        return session

    async def _from_store(self, session_id: str, where: Where, *, again: bool = False) -> Live:
        """The stored session opened in this process (once, however many requests ask at
        the same time; it is live only once it is ready, so they run in their order).
        `again`: it was let go, and comes back as it was, with its servers, unasked."""
        while (opening := self._opening.get(session_id)) is not None:
            await opening.wait()
            if (entry := self.live.get(session_id)) is not None:
                return entry
        done = self._opening[session_id] = anyio.Event()
        try:
            return await self._restore(session_id, where, again)
        finally:
            del self._opening[session_id]
            done.set()

    async def _restore(self, session_id: str, where: Where, again: bool) -> Live:
        parked = self.live.parked(session_id)
        if parked is not None:
            await parked.closed.wait()  # its log is ours to open once it is closed
        records = await anyio.to_thread.run_sync(self._read, session_id)
        stored = restore(records)
        session = self._session(session_id, where, stored)
        entry = Live(session, self._open_log(session_id), where.mcp_servers)
        try:
            _note_roots(entry, stored)
            _close_open_tool_calls(entry, records)
            if parked is not None:  # prompts and cancels read meanwhile keep their meaning
                session.tickets, session.commands_shown = parked.tickets, parked.commands_shown
            if again:
                await self.servers.connect(session, where.mcp_servers)
                await self.announce(session)
            if parked is not None and self.live.unpark(session_id) is None:
                raise UnknownSession(session_id)  # closed while it was being opened
        except BaseException:
            entry.close()
            with anyio.CancelScope(shield=True):
                await self.servers.close(session_id)
            raise
        self.live.add(entry)
        gc.freeze()  # a long history lives on: full collections need not walk it again
        log.info("session %s restored in %s using %s", session.id, where.cwd, session.model_choice)
        return entry

    def _open_log(self, session_id: str) -> SessionLog:
        try:
            return self.store.open_log(session_id)
        except SessionNotFound:
            raise UnknownSession(session_id) from None

    async def _let_go_over_limit(self) -> None:
        """Close the least recently used idle sessions past the limit, as `close` does;
        they stay stored and open again when their id is used."""
        while (session_id := self.live.next_to_let_go()) is not None:
            entry, parked = self.live.park(session_id)
            log.debug("session %s let go (%d live)", session_id, len(self.live))
            try:
                await self._release(entry)
            finally:
                parked.closed.set()

    async def _release(self, entry: Live) -> None:
        await entry.session.tool_state.jobs.close()  # no background job outlives its session
        entry.close()
        await self.servers.close(entry.session.id)

    def _read(self, session_id: str) -> list[Any]:
        try:
            return self.store.read(session_id)
        except SessionNotFound:
            raise UnknownSession(session_id) from None

    def _session(
        self, session_id: str, where: Where, stored: StoredSession | None = None
    ) -> Session:
        session = Session(
            id=session_id,
            cwd=where.cwd,
            roots=where.roots,
            model_choice=self.config.default_choice,
            usage=UsageMeter(counter=TokenCounter(load=self.encoder)),
        )
        if stored is not None:
            self._apply_stored(session, stored)
        return session

    def _apply_stored(self, session: Session, stored: StoredSession) -> None:
        session.history = stored.history
        session.permissions = permissions_in(stored, _root_strings(session.roots), session.id)
        session.title, session.title_chosen = stored.title, stored.title_chosen
        session.editor_prompt = stored.editor_prompt
        self.choices.restore(session, stored)
        session.summarised = stored.summarised
        if stored.usage is not None:
            session.usage.cost_usd = stored.usage.cost_usd
            if stored.usage.used is not None:
                session.usage.last = Reading(
                    stored.usage.used, stored.usage.cost_usd, stored.usage.estimated
                )
                session.usage.messages = len(stored.history)


def _keep_editor_prompt(entry: Live, prompt: EditorPrompt | None) -> None:
    """The request's editor prompt is the session's from now on, in the log too."""
    if prompt is not None and prompt != entry.session.editor_prompt:
        entry.session.editor_prompt = prompt
        entry.writer.append(EditorPromptRecord(prompt.mode, prompt.text))


def _note_roots(entry: Live, stored: StoredSession) -> None:
    """Record the roots the session works in now, when the log says otherwise: the
    answers given from here on are tied to them."""
    session = entry.session
    if stored.roots is None or not same_roots(stored.roots, _root_strings(session.roots)):
        entry.writer.append(_roots_record(session))


def _close_open_tool_calls(entry: Live, records: Sequence[Any]) -> None:
    """A process killed while tools ran left calls without results: answer them, and
    end the calls the user saw start (a load would show them running forever)."""
    results = open_call_results(entry.session.history, [], INTERRUPTED_RESULT)
    if results is None:
        return
    entry.keep(results)
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
            entry.writer.append(EventRecord(ended))


def _header(
    session_id: str,
    where: Where,
    *,
    forked_from: str | None = None,
    origin: str | None = None,
) -> SessionHeader:
    return SessionHeader(
        session_id,
        str(where.cwd),
        _root_strings(where.additional_roots),
        created_at=utc_now(),
        forked_from=forked_from,
        origin=origin,
    )


def _root_strings(roots: Sequence[Path]) -> tuple[str, ...]:
    return tuple(str(root) for root in roots)


def _roots_record(session: Session) -> RootsRecord:
    return RootsRecord(str(session.cwd), _root_strings(session.additional_roots))
