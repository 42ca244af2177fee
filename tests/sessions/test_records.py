"""The record codec: exact round trips, the v1 fixture, versions and upgrades, bad lines."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pytest
from store_samples import EXTRA_RECORDS, FIXTURE_V1, FIXTURE_V1_ID, V1_RECORDS

from acp_agent.messages import (
    ImagePart,
    Message,
    Part,
    ResourceLinkPart,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolResultPart,
    TurnEvent,
)
from acp_agent.sessions.errors import RecordError
from acp_agent.sessions.records import (
    RECORD_KINDS,
    RECORD_VERSION,
    EventRecord,
    MessageRecord,
    Record,
    TitleRecord,
    UsageRecord,
    decode,
    encode,
)
from acp_agent.sessions.store import SessionStore

ALL_RECORDS = V1_RECORDS + EXTRA_RECORDS


def _name(record: Record) -> str:
    if isinstance(record, EventRecord):
        return f"event-{type(record.event).__name__}"
    return record.kind


@pytest.mark.parametrize("record", ALL_RECORDS, ids=[_name(r) for r in ALL_RECORDS])
def test_every_record_survives_a_round_trip_unchanged(record: Record) -> None:
    line = encode(record)
    assert "\n" not in line
    payload = json.loads(line)
    assert payload["v"] == RECORD_VERSION
    assert payload["kind"] == record.kind
    assert decode(line) == record
    assert decode(line.encode("utf-8")) == record


def test_the_samples_cover_every_record_part_event_and_content_kind() -> None:
    records = ALL_RECORDS  # kinds added after version 1 are in EXTRA_RECORDS
    assert {r.kind for r in records} == RECORD_KINDS
    events = [r.event for r in records if isinstance(r, EventRecord)]
    assert {type(e) for e in events} == set(get_args(TurnEvent))
    parts = [p for r in records if isinstance(r, MessageRecord) for p in r.message.parts]
    assert {type(p) for p in parts} == set(get_args(Part))
    results = [p for p in parts if isinstance(p, ToolResultPart)]
    assert {type(c) for p in results for c in p.content} == {TextPart, ImagePart}
    contents = [c for e in events for c in (getattr(e, "content", None) or ())]
    assert {type(c) for c in contents} == set(get_args(ToolContent))


def test_the_version_1_fixture_loads_to_the_expected_records(tmp_path: Path) -> None:
    # This file was written by record format version 1. It must load, unchanged, in every
    # future version: never edit or regenerate it; add an upgrade step instead.
    lines = FIXTURE_V1.read_bytes().split(b"\n")
    assert lines.pop() == b""
    assert [decode(line) for line in lines] == V1_RECORDS
    store = SessionStore(tmp_path)
    (tmp_path / "sessions").mkdir()
    shutil.copy(FIXTURE_V1, tmp_path / "sessions" / f"{FIXTURE_V1_ID}.jsonl")
    assert store.read(FIXTURE_V1_ID) == V1_RECORDS


def test_every_version_1_fixture_line_is_written_again_as_the_same_json_object() -> None:
    # Compared as JSON objects (with their keys sorted), not byte for byte: the writer
    # orders keys as the dataclass declares its fields, which the hand-written version 1
    # writer did not for four types (a tool call started, a diff, a terminal stream,
    # usage). Types are compared too: `true` is not `1`, `1.0` is not `1`.
    def canonical(line: str | bytes) -> str:
        return json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False)

    lines = FIXTURE_V1.read_bytes().splitlines()
    assert len(lines) == len(V1_RECORDS)
    for line in lines:
        assert canonical(encode(decode(line))) == canonical(line)


def test_a_mentions_embedded_text_and_none_fields_are_not_written() -> None:
    link = ResourceLinkPart("file:///w/a.py", "a.py", embedded_text="the editor's copy")
    line = encode(MessageRecord(Message("user", [link])))
    assert "embedded_text" not in line
    assert "null" not in line
    assert decode(line) == MessageRecord(
        Message("user", [ResourceLinkPart("file:///w/a.py", "a.py")])
    )


def test_a_record_from_a_newer_version_is_a_clear_error() -> None:
    line = json.dumps({"v": RECORD_VERSION + 1, "kind": "title", "title": "x"})
    with pytest.raises(RecordError) as caught:
        decode(line)
    message = str(caught.value)
    assert f"version {RECORD_VERSION + 1}" in message
    assert f"({RECORD_VERSION})" in message
    assert "upgrade acp-agent" in message


def test_upgrades_run_in_order_from_the_records_version_to_the_current_one() -> None:
    calls: list[int] = []

    def from_1(payload: dict[str, Any]) -> dict[str, Any]:
        calls.append(1)
        payload["title"] = payload.pop("name")  # version 2 renamed `name` to `title`
        return payload

    def from_2(payload: dict[str, Any]) -> dict[str, Any]:
        calls.append(2)
        payload["title"] = payload["title"].upper()  # version 3 shouts
        return payload

    upgrades = {2: from_2, 1: from_1}  # registration order does not matter
    old = json.dumps({"v": 1, "kind": "title", "name": "old style"})
    assert decode(old, upgrades=upgrades, version=3) == TitleRecord("OLD STYLE")
    assert calls == [1, 2]
    calls.clear()
    middle = json.dumps({"v": 2, "kind": "title", "title": "middle"})
    assert decode(middle, upgrades=upgrades, version=3) == TitleRecord("MIDDLE")
    assert calls == [2]
    calls.clear()
    current = json.dumps({"v": 3, "kind": "title", "title": "as is"})
    assert decode(current, upgrades=upgrades, version=3) == TitleRecord("as is")
    assert calls == []


def test_a_missing_upgrade_step_or_a_failing_one_is_a_record_error() -> None:
    line = json.dumps({"v": 0, "kind": "title", "title": "x"})
    with pytest.raises(RecordError, match="no upgrade from record format version 0 to 1"):
        decode(line)

    def broken(payload: dict[str, Any]) -> dict[str, Any]:
        return {"v": 1, "kind": "title", "title": payload["missing"]}

    with pytest.raises(RecordError, match="upgrading a version 0 record failed"):
        decode(line, upgrades={0: broken})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"v":1,"kind":"title","title":"x"', "not a JSON line"),
        (b'{"v":1,"kind":"title","title":"\xff\xfe"}', "not a JSON line"),
        ("[1, 2]", "not a JSON object"),
        ("[" * 5_000 + "]" * 5_000, "not a JSON line"),
        ('{"kind":"title","title":"x"}', "no format version"),
        ('{"v":true,"kind":"title","title":"x"}', "no format version"),
        ('{"v":1,"kind":"nonsense"}', "unknown record kind: 'nonsense'"),
        ('{"v":1,"title":"x"}', "unknown record kind: None"),
        ('{"v":1,"kind":"title"}', "title record: missing field 'title'"),
        ('{"v":1,"kind":"title","title":7}', "field 'title' should be a string"),
        ('{"v":1,"kind":"usage","used":"3","estimated":false}', "'used' should be an integer"),
        ('{"v":1,"kind":"usage","used":true,"estimated":false}', "'used' should be an integer"),
        (
            '{"v":1,"kind":"message","message":{"role":"robot","parts":[]}}',
            "'role' should be one of",
        ),
        (
            '{"v":1,"kind":"message","message":{"role":"user","parts":[{"kind":"video"}]}}',
            "unknown part kind: 'video'",
        ),
        (
            '{"v":1,"kind":"message","message":{"role":"user","parts":["text"]}}',
            "part should be an object",
        ),
        (
            '{"v":1,"kind":"message","message":{"role":"tool","parts":[{"kind":"tool_result",'
            '"tool_call_id":"c","content":[{"kind":"thinking","text":"t"}]}]}}',
            "a thinking part cannot appear here",
        ),
        ('{"v":1,"kind":"event","event":{"kind":"bell"}}', "unknown event kind: 'bell'"),
        (
            '{"v":1,"kind":"event","event":{"kind":"tool_call_started","id":"c","title":"t",'
            '"tool_kind":"teleport","status":"pending","locations":[],"content":[]}}',
            "'tool_kind' should be one of",
        ),
        (
            '{"v":1,"kind":"event","event":{"kind":"tool_call_updated","id":"c",'
            '"content":[{"kind":"hologram"}]}}',
            "unknown tool content kind: 'hologram'",
        ),
        (
            '{"v":1,"kind":"permissions","allowed":["a",1],"rejected":[]}',
            "'allowed' should be a list of strings",
        ),
        ('{"v":1,"kind":"header","session_id":"s","cwd":"/"}', "missing field"),
        (
            '{"v":1,"kind":"event","event":{"kind":"user_message_chunk",'
            '"part":{"kind":"tool_call","id":"c","name":"n","arguments":{}}}}',
            "a tool_call part cannot appear here",
        ),
        ('{"v":1,"kind":"event","event":{"kind":["a list"]}}', "event record: unhashable"),
        (
            '{"v":1,"kind":"event","event":{"kind":"plan_updated","entries":[{"content":"x",'
            '"priority":"urgent","status":"pending"}]}}',
            "'priority' should be one of",
        ),
        ('{"v":1,"kind":"usage","cost_usd":true,"estimated":false}', "'cost_usd' should be a"),
    ],
)
def test_a_malformed_line_is_a_record_error(line: str | bytes, message: str) -> None:
    with pytest.raises(RecordError, match=re.escape(message)):
        decode(line)


@pytest.mark.parametrize(
    ("line", "record"),
    [
        ('{"v":1,"kind":"usage"}', UsageRecord()),
        ('{"v":1,"kind":"usage","cost_usd":2,"used":null}', UsageRecord(cost_usd=2.0)),
        (
            '{"v":1,"kind":"message","message":{"role":"tool","parts":[{"kind":"tool_result",'
            '"tool_call_id":"c","content":[{"kind":"text","text":"ok"}]}]}}',
            MessageRecord(Message("tool", [ToolResultPart("c", (TextPart("ok"),))])),
        ),
    ],
)
def test_what_the_version_1_reader_accepted_still_loads(line: str, record: Record) -> None:
    # Absent or null: None for a field that may be None, the default for a boolean; a whole
    # number where a float is declared reads as a float.
    decoded = decode(line)
    assert decoded == record
    if isinstance(decoded, UsageRecord) and decoded.cost_usd is not None:
        assert type(decoded.cost_usd) is float


def test_unknown_fields_are_ignored() -> None:
    line = '{"v":1,"kind":"title","title":"x","added_later":{"a":1}}'
    assert decode(line) == TitleRecord("x")


def test_a_value_json_cannot_hold_is_a_record_error_when_encoding() -> None:
    with pytest.raises(RecordError, match="cannot encode a event record"):
        encode(EventRecord(ToolCallUpdated("c", raw_output={"when": object()})))
    with pytest.raises(RecordError, match="cannot encode a usage record"):
        encode(UsageRecord(cost_usd=float("nan")))
    with pytest.raises(RecordError, match="not a record"):
        encode(Message("user", []))  # type: ignore[arg-type]


def test_a_value_of_a_type_the_format_does_not_tag_there_is_not_written() -> None:
    with pytest.raises(RecordError, match="Message is none of the event kinds"):
        encode(EventRecord(Message("user", [])))  # type: ignore[arg-type]
    summary = Message("assistant", [ToolCallStarted("c", "t", "read")])  # type: ignore[list-item]
    with pytest.raises(RecordError, match="ToolCallStarted is none of the part kinds"):
        encode(MessageRecord(summary))


def test_a_tool_call_recorded_before_names_were_kept_loads_without_a_name() -> None:
    started = ToolCallStarted("c1", "Read a.py", "read", name="read_file")
    payload = json.loads(encode(EventRecord(started)))
    assert payload["event"]["name"] == "read_file"
    del payload["event"]["name"]

    assert decode(json.dumps(payload)) == EventRecord(replace(started, name=None))
