"""The sessions open in this process: a bounded set, the least recently used idle ones let go.

Every live session holds its log open (a descriptor, and the log's one-writer lock) and
its MCP server connections. Its entry here, `Live`, is the log's one owner: it takes the
log as it is opened and alone closes it; whoever writes to it (the turn runner and its
recorder, compaction, the lifecycle, commands and choices) is handed `Live.writer`.

Past `limit` live sessions, the least recently used idle one (no turn running or queued,
no work beside the turns, no request using it) is let go: the lifecycle closes it as
`session/close` does and it is parked here with what opening it again needs (its roots,
the MCP servers its editor gave, its prompt queue's tickets, the commands the editor was
shown). When the client uses a parked id, the lifecycle opens it again from the store,
and the client sees no difference but the time that takes.

A prompt or cancel read while its session is parked works on the parked tickets, so the
prompt keeps its place and the cancel its reach (ARCHITECTURE rule 10).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ..mcp_bridge import McpServerSpec
from ..messages import CommandInfo, Message
from .records import MessageRecord
from .session import PromptTickets, Session
from .store import LogWriter, SessionLog


@dataclass
class Parked:
    """A session let go, and what opening it again as it was needs."""

    cwd: Path
    additional_roots: tuple[Path, ...]
    mcp_servers: tuple[McpServerSpec, ...]
    tickets: PromptTickets
    commands_shown: tuple[CommandInfo, ...] | None
    closed: anyio.Event = field(default_factory=anyio.Event)
    """Set once its log and servers are closed: only then may it be opened again."""


@dataclass
class Live:
    """A session in this process and its open log, which this entry owns."""

    session: Session
    _log: SessionLog = field(repr=False)
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """The servers the editor gave (the config's are added when connecting)."""
    uses: int = 0
    fresh_size: int | None = None
    """The log's size once `session/new` had written it; None for a session opened any
    other way."""

    @property
    def writer(self) -> LogWriter:
        return self._log

    def mark_fresh(self) -> None:
        self.fresh_size = self._log.size

    @property
    def unused(self) -> bool:
        """A new session closed as it was made: no prompt, no choice, nothing written since."""
        return self.fresh_size is not None and self._log.size == self.fresh_size

    def keep(self, message: Message) -> None:
        """`message` joins the history, stored first: memory holds only what was stored."""
        self._log.append(MessageRecord(message))
        self.session.history.append(message)

    def close(self) -> None:
        """Close the log: nothing is written to it afterwards, and another process may
        open it."""
        self._log.close()


class LiveSessions:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._live: OrderedDict[str, Live] = OrderedDict()  # least recently used first
        self._parked: dict[str, Parked] = {}

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Live]:
        return iter(list(self._live.values()))

    def get(self, session_id: str) -> Live | None:
        return self._live.get(session_id)

    def add(self, entry: Live) -> None:
        self._live[entry.session.id] = entry

    def set_servers(self, session_id: str, mcp_servers: Sequence[McpServerSpec]) -> None:
        self._live[session_id].mcp_servers = tuple(mcp_servers)

    def remove(self, session_id: str) -> Live:
        return self._live.pop(session_id)

    @contextmanager
    def using(self, session_id: str) -> Iterator[None]:
        """Mark the session most recently used, and not to be let go until the block ends."""
        entry = self._live[session_id]
        self._live.move_to_end(session_id)
        entry.uses += 1
        try:
            yield
        finally:
            entry.uses -= 1

    # --- parked sessions -----------------------------------------------------------------

    def next_to_let_go(self) -> str | None:
        """The least recently used idle session, while more than `limit` are live."""
        if len(self._live) <= self.limit:
            return None
        return next((sid for sid, e in self._live.items() if e.uses == 0 and e.session.idle), None)

    def park(self, session_id: str) -> tuple[Live, Parked]:
        """Move a live session to the parked ones; closing it is the caller's part (then
        it sets `Parked.closed`)."""
        entry = self._live.pop(session_id)
        session = entry.session
        parked = self._parked[session_id] = Parked(
            session.cwd,
            session.additional_roots,
            entry.mcp_servers,
            session.tickets,
            session.commands_shown,
        )
        return entry, parked

    def parked(self, session_id: str) -> Parked | None:
        return self._parked.get(session_id)

    def unpark(self, session_id: str) -> Parked | None:
        return self._parked.pop(session_id, None)

    def parked_sessions(self) -> list[Parked]:
        return list(self._parked.values())


__all__ = ["Live", "LiveSessions", "Parked"]
