"""What the session store raises.

    StoreError                 anything the store cannot do
    ├── SessionNotFound        no session by that id (or an id that cannot name a file)
    ├── SessionExists          `create` / `fork` onto an id already taken
    ├── SessionCorrupt         a log whose header is missing or unreadable: it cannot load
    ├── SessionLocked          a log another process has open for writing (one writer)
    └── RecordError            one line that does not encode or decode as a record
                               (malformed, unknown kind, or from a newer version)

A `RecordError` while reading a log is not fatal: the reader skips that line with a
warning and the session loads without it. Only a bad header makes a whole log unloadable.

What the session manager raises besides (the agent turns them into JSON-RPC errors):

    UnknownSession (LookupError)   no live session by that id, and none stored
    ChoiceError (ValueError)       a choice the session cannot take
"""

from __future__ import annotations

from typing import ClassVar


class StoreError(Exception):
    """Base class of the session store's errors."""


class _OfSession(Exception):
    """An error about one session: its message (`template`) names the id, `session_id`
    keeps it."""

    template: ClassVar[str] = "session {!r}"

    def __init__(self, session_id: str) -> None:
        super().__init__(self.template.format(session_id))
        self.session_id = session_id


class SessionNotFound(_OfSession, StoreError):
    template = "session not found: {!r}"


class SessionExists(_OfSession, StoreError):
    template = "session already exists: {!r}"


class SessionCorrupt(StoreError):
    """The log exists but cannot be loaded (its first line is not a readable header)."""


class SessionLocked(StoreError):
    """Another process (another acp-agent) has the session's log open for appending."""

    def __init__(self, session_id: str, pid: int | None) -> None:
        holder = f"another acp-agent (pid {pid})" if pid is not None else "another acp-agent"
        super().__init__(f"session {session_id!r} is open in {holder}; close it there first")
        self.session_id = session_id
        self.pid = pid


class RecordError(StoreError):
    """A record that cannot be encoded, or a line that cannot be decoded into one."""


class UnknownSession(_OfSession, LookupError):
    template = "unknown session {!r}"


class ChoiceError(ValueError):
    """A choice the session cannot take; the message says which values it can."""


__all__ = [
    "ChoiceError",
    "RecordError",
    "SessionCorrupt",
    "SessionExists",
    "SessionLocked",
    "SessionNotFound",
    "StoreError",
    "UnknownSession",
]
