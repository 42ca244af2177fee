"""The session store: logs, damaged lines, secrets, fork, delete, ids, permissions."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from store_samples import V1_RECORDS, turn_messages

from acp_agent.messages import Message, TextPart, ToolCallStarted, ToolResultPart
from acp_agent.sessions.errors import (
    SessionCorrupt,
    SessionExists,
    SessionNotFound,
    StoreError,
)
from acp_agent.sessions.records import (
    EventRecord,
    MessageRecord,
    Record,
    SessionHeader,
    TitleRecord,
    UsageRecord,
    encode,
)
from acp_agent.sessions.store import SessionStore, default_state_dir

STORE_LOGGER = "acp_agent.sessions.store"
CREATED = "2025-03-04T05:06:07.000000Z"


def header(session_id: str = "s1", cwd: str = "/work/project") -> SessionHeader:
    return SessionHeader(session_id, cwd, ("/work/lib",), CREATED)


def log_path(store: SessionStore, session_id: str = "s1") -> Path:
    return store.sessions_dir / f"{session_id}.jsonl"


def write_session(store: SessionStore, records: list[Record], session_id: str = "s1") -> None:
    log = store.create(header(session_id))
    for record in records:
        log.append(record)
    log.close()


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "state")


# --- writing and reading -------------------------------------------------------------------


def test_a_created_log_reads_back_its_header_and_every_appended_record(
    store: SessionStore,
) -> None:
    records = V1_RECORDS[1:] + turn_messages(1)
    write_session(store, records)
    assert store.read("s1") == [header(), *records]
    assert store.exists("s1")


def test_each_record_is_one_line_on_disk_as_soon_as_it_is_appended(store: SessionStore) -> None:
    log = store.create(header())
    log.append(TitleRecord("first"))
    assert log_path(store).read_text().splitlines()[1] == encode(TitleRecord("first"))
    assert store.read("s1")[-1] == TitleRecord("first")
    log.close()


def test_an_existing_log_is_appended_to_after_reopening(store: SessionStore) -> None:
    write_session(store, [TitleRecord("one")])
    log = store.open_log("s1")
    log.append(TitleRecord("two"))
    log.close()
    assert store.read("s1")[1:] == [TitleRecord("one"), TitleRecord("two")]


def test_creating_a_taken_id_fails_and_leaves_the_log_alone(store: SessionStore) -> None:
    write_session(store, [TitleRecord("one")])
    before = log_path(store).read_bytes()
    with pytest.raises(SessionExists):
        store.create(header())
    assert log_path(store).read_bytes() == before


def test_an_unknown_session_is_not_found(store: SessionStore) -> None:
    for call in (store.read, store.open_log, store.delete):
        with pytest.raises(SessionNotFound):
            call("nope")
    with pytest.raises(SessionNotFound):
        store.fork("nope", header("s2"))
    assert not store.exists("nope")


def test_a_closed_log_refuses_appends(store: SessionStore) -> None:
    log = store.create(header())
    log.close()
    log.close()  # twice is fine
    assert log.closed
    with pytest.raises(StoreError, match="closed"):
        log.append(TitleRecord("late"))


@pytest.mark.anyio
async def test_sync_and_summary_updates_reach_the_disk(store: SessionStore) -> None:
    log = store.create(header())
    log.append(TitleRecord("Fix it"))
    await log.sync()
    summary = await log.update_summary(title="Fix it", updated_at="2025-03-04T07:06:07+02:00")
    assert summary.title == "Fix it"
    assert summary.updated_at == "2025-03-04T05:06:07.000000Z"  # normalised to UTC
    assert log.summary == summary
    assert store.summaries() == [summary]
    later = await log.update_summary()  # now; the title stays
    assert later.title == "Fix it"
    assert later.updated_at > summary.updated_at
    with pytest.raises(ValueError, match="not an ISO 8601 time"):
        await log.update_summary(updated_at="yesterday")
    log.close()
    assert not list(store.sessions_dir.glob("*.tmp"))  # no temporary file left behind


# --- damaged logs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b'{"v":1,"kind":"title","ti', id="half-a-line"),
        pytest.param(b"\x00\x13garbage\xde\xad\n", id="garbage-bytes"),
        pytest.param(b'{"v":1,"kind":"title","title":"\xff\xfe"}\n', id="invalid-utf8"),
        pytest.param(b'{"v":99,"kind":"title","title":"future"}\n', id="newer-version"),
    ],
)
def test_a_corrupt_last_record_is_skipped_with_a_warning(
    store: SessionStore, tail: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    write_session(store, [TitleRecord("kept")])
    with log_path(store).open("ab") as file:
        file.write(tail)
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        assert store.read("s1") == [header(), TitleRecord("kept")]
    assert len(caplog.records) == 1
    assert f"{log_path(store)}:3: skipping" in caplog.records[0].getMessage()


def test_a_corrupt_middle_record_is_skipped_and_the_rest_loads(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    write_session(store, [TitleRecord("one")])
    with log_path(store).open("ab") as file:
        file.write(b'{"v":1,"kind":"title","title":\n')
        file.write(b"\n")
        file.write((encode(header()) + "\n").encode())  # a second header is no record
        file.write((encode(TitleRecord("two")) + "\n").encode())
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        assert store.read("s1") == [header(), TitleRecord("one"), TitleRecord("two")]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert f"{log_path(store)}:3: skipping a record that does not load" in messages[0]
    assert f"{log_path(store)}:4: skipping" in messages[1]
    assert f"{log_path(store)}:5: skipping a second header" in messages[2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"", "no complete header line", id="empty"),
        pytest.param(encode(header()).encode(), "no complete header line", id="torn-header"),
        pytest.param(b"{not json\n", "the header does not load", id="garbage-header"),
        pytest.param(
            (encode(TitleRecord("t")) + "\n").encode(), "is a title, not a header", id="no-header"
        ),
        pytest.param(
            (encode(header("other")) + "\n").encode(), "names session 'other'", id="other-session"
        ),
        pytest.param(
            b'{"v":2,"kind":"header","session_id":"s1"}\n', "newer than", id="newer-header"
        ),
    ],
)
def test_a_log_without_a_readable_header_is_corrupt(
    store: SessionStore, content: bytes, message: str
) -> None:
    store.sessions_dir.mkdir(parents=True)
    log_path(store).write_bytes(content)
    with pytest.raises(SessionCorrupt, match=message) as caught:
        store.read("s1")
    assert str(log_path(store)) in str(caught.value)
    with pytest.raises(SessionCorrupt):
        store.open_log("s1")


def test_reopening_cuts_a_torn_tail_so_new_records_do_not_glue_onto_it(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    write_session(store, [TitleRecord("one")])
    with log_path(store).open("ab") as file:
        file.write(encode(TitleRecord("torn")).encode()[:-5])
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        log = store.open_log("s1")
    assert "cutting off a torn last record" in caplog.text
    log.append(TitleRecord("two"))
    log.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        assert store.read("s1")[1:] == [TitleRecord("one"), TitleRecord("two")]
    assert caplog.records == []


# --- secrets -------------------------------------------------------------------------------

SECRET = "sk-live-0123456789abcdef"
ODD_SECRET = 'p@ss"word\\with\tescapes'


def test_secrets_never_reach_the_log_or_the_sidecar(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, secrets=[SECRET, ODD_SECRET, "short", ""])
    log = store.create(SessionHeader("s1", f"/home/{SECRET}", (), CREATED))
    log.append(MessageRecord(Message("user", [TextPart(f"my key is {SECRET}, ok? short")])))
    log.append(EventRecord(ToolCallStarted("c", "env", "execute", raw_input={SECRET: ODD_SECRET})))
    log.append(MessageRecord(Message("tool", [ToolResultPart("c", (TextPart(f"KEY={SECRET}x"),))])))
    log.append(TitleRecord(f"about {ODD_SECRET}"))
    log.close()
    store.fork("s1", SessionHeader("s2", "/w", (), CREATED))

    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data, path
            assert ODD_SECRET.encode() not in data, path
            assert b'p@ss\\"word\\\\with\\tescapes' not in data, path
    records = store.read("s1")
    assert records[0] == SessionHeader("s1", "/home/[redacted]", (), CREATED)
    assert records[1] == MessageRecord(
        Message("user", [TextPart("my key is [redacted], ok? short")])  # short: kept
    )
    assert records[2] == EventRecord(
        ToolCallStarted("c", "env", "execute", raw_input={"[redacted]": "[redacted]"})
    )
    assert records[3] == MessageRecord(
        Message("tool", [ToolResultPart("c", (TextPart("KEY=[redacted]x"),))])
    )
    assert records[4] == TitleRecord("about [redacted]")
    assert {s.session_id: s.cwd for s in store.summaries()}["s1"] == "/home/[redacted]"


def test_a_secret_that_only_fits_a_number_is_dropped_with_its_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SessionStore(tmp_path, secrets=["1234567890"])
    log = store.create(header())
    log.append(UsageRecord(used=1234567890))
    log.append(TitleRecord("after"))
    log.close()
    assert b"1234567890" not in log_path(store).read_bytes()
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        assert store.read("s1")[1:] == [TitleRecord("after")]


@pytest.mark.anyio
async def test_a_secret_in_a_new_title_is_redacted_in_the_sidecar(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, secrets=[SECRET])
    log = store.create(header())
    await log.update_summary(title=f"use {SECRET}")
    log.close()
    sidecar = (store.sessions_dir / "s1.meta.json").read_bytes()
    assert SECRET.encode() not in sidecar
    assert store.summaries()[0].title == "use [redacted]"


# --- fork and delete -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_fork_copies_the_records_under_a_new_header_and_leaves_the_source_alone(
    store: SessionStore,
) -> None:
    records = [*turn_messages(1), TitleRecord("Original")]
    log = store.create(header())
    for record in records:
        log.append(record)
    await log.update_summary(title="Original")
    log.close()
    with log_path(store).open("ab") as file:  # a crash left a torn tail: it is not copied
        file.write(b'{"v":1,"kind":"ti')
    source = log_path(store).read_bytes()

    fork = store.fork("s1", SessionHeader("s2", "/elsewhere", (), "2025-05-05T00:00:00Z"))
    assert fork.summary.title == "Original"
    assert fork.summary.cwd == "/elsewhere"
    fork.append(TitleRecord("Forked"))
    fork.close()
    assert log_path(store).read_bytes() == source
    log = store.open_log("s1")
    log.append(TitleRecord("source goes on"))
    log.close()

    assert store.read("s2") == [
        SessionHeader("s2", "/elsewhere", (), "2025-05-05T00:00:00Z", forked_from="s1"),
        *records,
        TitleRecord("Forked"),
    ]
    assert store.read("s1")[-1] == TitleRecord("source goes on")
    summaries = {s.session_id: s for s in store.summaries()}
    assert summaries["s2"].title == "Original"
    assert summaries["s2"].updated_at == "2025-05-05T00:00:00.000000Z"


def test_a_fork_leaves_the_source_byte_identical(store: SessionStore) -> None:
    write_session(store, turn_messages(1))
    before = log_path(store).read_bytes()
    meta_before = (store.sessions_dir / "s1.meta.json").read_bytes()
    fork = store.fork("s1", header("s2"))
    fork.append(TitleRecord("only in the fork"))
    fork.close()
    assert log_path(store).read_bytes() == before
    assert (store.sessions_dir / "s1.meta.json").read_bytes() == meta_before


def test_a_fork_onto_a_taken_id_or_naming_another_source_fails(store: SessionStore) -> None:
    write_session(store, [], "s1")
    write_session(store, [], "s2")
    with pytest.raises(SessionExists):
        store.fork("s1", header("s2"))
    with pytest.raises(ValueError, match="cannot name 'x' as its source"):
        store.fork("s1", SessionHeader("s3", "/", (), CREATED, forked_from="x"))


def test_delete_removes_the_log_and_its_sidecar(store: SessionStore) -> None:
    write_session(store, [TitleRecord("bye")], "s1")
    write_session(store, [], "s2")
    store.delete("s1")
    assert not store.exists("s1")
    assert sorted(p.name for p in store.sessions_dir.iterdir()) == ["s2.jsonl", "s2.meta.json"]
    with pytest.raises(SessionNotFound):
        store.read("s1")
    with pytest.raises(SessionNotFound):
        store.delete("s1")
    assert [s.session_id for s in store.summaries()] == ["s2"]


# --- ids, files, directories ---------------------------------------------------------------

BAD_IDS = ["../x", "a/b", "", "x" * 129, "..", ".", "a.b", "a\x00b", "/etc/passwd", "a\\b", "é"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_an_id_that_cannot_name_a_file_is_never_found(store: SessionStore, bad: str) -> None:
    write_session(store, [])
    (store.directory / "x.jsonl").write_bytes(log_path(store).read_bytes())  # bait for ../x
    for call in (store.read, store.open_log, store.delete):
        with pytest.raises(SessionNotFound):
            call(bad)
    with pytest.raises(SessionNotFound):
        store.fork(bad, header("s9"))
    assert not store.exists(bad)
    with pytest.raises(ValueError, match="not a valid session id"):
        store.create(header(bad))
    assert (store.directory / "x.jsonl").exists()


def test_the_longest_valid_id_works(store: SessionStore) -> None:
    long_id = "A-z_9" * 25 + "abc"
    assert len(long_id) == 128
    write_session(store, [], long_id)
    assert store.read(long_id)[0].session_id == long_id  # type: ignore[union-attr]


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
def test_files_are_the_owners_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        store = SessionStore(tmp_path / "state")
        write_session(store, [TitleRecord("t")])
        store.fork("s1", header("s2")).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(store.sessions_dir.stat().st_mode) == 0o700
    files = list(store.sessions_dir.iterdir())
    assert len(files) == 4
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_the_state_directory_follows_xdg_then_the_platform() -> None:
    home = {"HOME": "/home/ada"}
    assert default_state_dir({**home, "XDG_STATE_HOME": "/xdg/state"}) == Path(
        "/xdg/state/acp-agent"
    )
    linux = default_state_dir({**home, "XDG_STATE_HOME": "relative/ignored"}, platform="linux")
    assert linux == Path("/home/ada/.local/state/acp-agent")
    assert default_state_dir(home, platform="freebsd14") == linux
    assert default_state_dir(home, platform="darwin") == Path(
        "/home/ada/Library/Application Support/acp-agent"
    )
    windows = {**home, "LOCALAPPDATA": "/c/Users/ada/AppData/Local"}
    assert default_state_dir(windows, platform="win32") == Path(
        "/c/Users/ada/AppData/Local/acp-agent"
    )
    assert default_state_dir(home, platform="win32") == Path("/home/ada/AppData/Local/acp-agent")


def test_the_test_environment_keeps_the_state_directory_out_of_the_real_home(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    state = default_state_dir()
    assert state.is_relative_to(tmp_path_factory.getbasetemp())
