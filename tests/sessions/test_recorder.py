"""`TurnRecorder`: what a turn shows is written to the log as it happens."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_agent.messages import Message, MessageChunk, TextPart, ThoughtChunk, ToolCallStarted
from acp_agent.sessions import recorder as recorder_module
from acp_agent.sessions.recorder import TurnRecorder
from acp_agent.sessions.records import EventRecord, MessageRecord, SessionHeader
from acp_agent.sessions.store import SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(recorder_module.time, "monotonic", fake)
    return fake


def new_log(tmp_path: Path) -> tuple[SessionStore, TurnRecorder]:
    store = SessionStore(tmp_path)
    log = store.create(SessionHeader("s1", str(tmp_path)))
    return store, TurnRecorder(log)


def test_a_run_of_text_is_one_record_and_a_new_message_id_starts_another(
    tmp_path: Path, clock: Clock
) -> None:
    store, recorder = new_log(tmp_path)
    for word in ("Hel", "lo", " there"):
        recorder.observe(MessageChunk(word, "m1"))
    recorder.observe(ThoughtChunk("hmm", "t1"))
    recorder.observe(MessageChunk("Next", "m2"))
    recorder.observe(ToolCallStarted("c1", "read", "read"))
    recorder.keep(Message("user", [TextPart("q")]), "u1")

    records = store.read("s1")[1:]
    assert records == [
        EventRecord(MessageChunk("Hello there", "m1")),
        EventRecord(ThoughtChunk("hmm", "t1")),
        EventRecord(MessageChunk("Next", "m2")),
        EventRecord(ToolCallStarted("c1", "read", "read")),
        MessageRecord(Message("user", [TextPart("q")]), "u1"),
    ]


def test_a_long_streaming_reply_is_written_at_least_once_a_second(
    tmp_path: Path, clock: Clock
) -> None:
    store, recorder = new_log(tmp_path)
    recorder.observe(MessageChunk("first ", "m1"))
    clock.now += 0.5
    recorder.observe(MessageChunk("second ", "m1"))
    assert store.read("s1")[1:] == []  # still gathering: under a second
    clock.now += 0.6
    recorder.observe(MessageChunk("third ", "m1"))
    # A process killed now keeps what streamed so far.
    assert store.read("s1")[1:] == [EventRecord(MessageChunk("first second third ", "m1"))]
    recorder.observe(MessageChunk("fourth", "m1"))
    recorder.flush()
    assert store.read("s1")[2:] == [EventRecord(MessageChunk("fourth", "m1"))]
