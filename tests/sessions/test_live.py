"""A live session's entry owns its log: it alone closes it, everyone else writes through
`Live.writer`, and a message joins the history only once it is stored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_agent.messages import Message, TextPart, ToolCallPart
from acp_agent.sessions.errors import RecordError, SessionLocked, StoreError
from acp_agent.sessions.live import Live
from acp_agent.sessions.records import MessageRecord, SessionHeader, TitleRecord
from acp_agent.sessions.session import Session
from acp_agent.sessions.store import SessionStore


def live_session(store: SessionStore) -> Live:
    log = store.create(SessionHeader("s1", "/w", (), "2025-01-01T00:00:00.000000Z"))
    return Live(Session("s1", Path("/w"), (Path("/w"),), "echo/echo"), log)


def test_a_kept_message_is_in_the_log_before_it_is_in_the_history(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    entry = live_session(store)
    said = Message("user", [TextPart("hello")])

    entry.keep(said)

    assert entry.session.history == [said]
    assert store.read("s1")[1:] == [MessageRecord(said)]
    entry.close()


def test_a_message_the_log_cannot_hold_never_joins_the_history(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    entry = live_session(store)
    unstorable = Message("assistant", [ToolCallPart("c1", "run", {"when": object()})])

    with pytest.raises(RecordError):
        entry.keep(unstorable)

    assert entry.session.history == []
    assert store.read("s1")[1:] == []  # nothing half-written either
    entry.close()


@pytest.mark.skipif(os.name != "posix", reason="flock is POSIX")
def test_the_log_is_another_processs_to_open_only_once_its_entry_closed_it(
    tmp_path: Path,
) -> None:
    entry = live_session(SessionStore(tmp_path))
    other = SessionStore(tmp_path)  # a second open file: another process, to the kernel
    entry.writer.append(TitleRecord("kept"))
    with pytest.raises(SessionLocked):
        other.open_log("s1")

    entry.close()

    assert entry.writer.closed
    with pytest.raises(StoreError, match="closed"):
        entry.writer.append(TitleRecord("too late"))
    reopened = other.open_log("s1")
    assert other.read("s1")[1:] == [TitleRecord("kept")]
    reopened.close()
