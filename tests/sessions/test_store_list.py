"""Listing sessions: order, cwd filter, cursor pagination, and sidecars rebuilt from logs."""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path

import pytest

from acp_agent.sessions.records import SessionHeader, TitleRecord, encode
from acp_agent.sessions.store import SessionStore, SessionSummary

STORE_LOGGER = "acp_agent.sessions.store"


def at(second: int) -> str:
    """A distinct time per second (minutes roll over past 59)."""
    return f"2025-01-01T00:{second // 60:02d}:{second % 60:02d}.000000Z"


def add(store: SessionStore, session_id: str, second: int, cwd: str = "/w") -> None:
    """A session whose `updated_at` is `at(second)` (a new session's is its creation)."""
    store.create(SessionHeader(session_id, cwd, (), at(second))).close()


def ids(summaries: list[SessionSummary]) -> list[str]:
    return [s.session_id for s in summaries]


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path)


def test_an_empty_store_lists_nothing(store: SessionStore) -> None:
    assert store.list() == ([], None)
    assert store.summaries() == []


def test_sessions_are_listed_newest_first_and_ties_by_id(store: SessionStore) -> None:
    add(store, "old", 1)
    add(store, "new", 3)
    add(store, "tie-b", 2)
    add(store, "tie-a", 2)
    page, cursor = store.list()
    assert ids(page) == ["new", "tie-a", "tie-b", "old"]
    assert cursor is None
    assert page[0] == SessionSummary("new", "/w", (), None, at(3), at(3))


@pytest.mark.anyio
async def test_an_updated_session_moves_to_the_top_with_its_title(store: SessionStore) -> None:
    add(store, "a", 1)
    add(store, "b", 2)
    log = store.open_log("a")
    await log.update_summary(title="Now on top", updated_at=at(5))
    log.close()
    page, _ = store.list()
    assert ids(page) == ["a", "b"]
    assert page[0].title == "Now on top"


def test_the_cwd_filter_matches_the_normalised_directory_exactly(store: SessionStore) -> None:
    add(store, "a", 1, "/work/a")
    add(store, "a-slash", 2, "/work/a/")
    add(store, "a-dots", 3, "/work/b/../a")
    add(store, "a-child", 4, "/work/a/sub")
    add(store, "b", 5, "/work/b")
    assert ids(store.list(cwd="/work/a")[0]) == ["a-dots", "a-slash", "a"]
    assert ids(store.list(cwd="/work/./a/")[0]) == ["a-dots", "a-slash", "a"]
    assert ids(store.list(cwd="/work/b")[0]) == ["b"]
    assert store.list(cwd="/nowhere") == ([], None)


def test_pages_cover_every_session_once_in_order(store: SessionStore) -> None:
    for n in range(120):
        add(store, f"s{n:03d}", n % 45)  # ties across page boundaries
    everything = ids(store.summaries())
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page, cursor = store.list(cursor=cursor, page_size=50)
        pages.append(ids(page))
        if cursor is None:
            break
    assert [len(p) for p in pages] == [50, 50, 20]
    flat = [session_id for page in pages for session_id in page]
    assert flat == everything
    assert len(set(flat)) == 120


def test_a_page_ending_exactly_at_the_last_session_has_no_next_cursor(
    store: SessionStore,
) -> None:
    for n in range(4):
        add(store, f"s{n}", n)
    page, cursor = store.list(page_size=2)
    assert cursor is not None
    page, cursor = store.list(cursor=cursor, page_size=2)
    assert ids(page) == ["s1", "s0"]
    assert cursor is None


def test_a_session_created_between_pages_does_not_shift_the_next_page(
    store: SessionStore,
) -> None:
    for n in range(10):
        add(store, f"s{n}", n)
    first, cursor = store.list(page_size=4)
    assert cursor is not None
    expected, _ = store.list(cursor=cursor, page_size=4)
    add(store, "newest", 100)
    add(store, "also-new", 50)
    second, _ = store.list(cursor=cursor, page_size=4)
    assert second == expected
    assert ids(first) == ["s9", "s8", "s7", "s6"]
    assert ids(second) == ["s5", "s4", "s3", "s2"]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor!",
        "",
        _b64(b"\xff\xfe"),
        _b64(b"{}"),
        _b64(json.dumps(["2025-01-01T00:00:00.000000Z"]).encode()),
        _b64(json.dumps(["yesterday", "s1"]).encode()),
        _b64(json.dumps(["2025-01-01T00:00:00.000000Z", 7]).encode()),
    ],
)
def test_a_malformed_cursor_is_a_clear_value_error(store: SessionStore, cursor: str) -> None:
    add(store, "s1", 1)
    with pytest.raises(ValueError, match=r"malformed cursor .*nextCursor"):
        store.list(cursor=cursor)


def test_a_page_size_below_one_is_refused(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="page size"):
        store.list(page_size=0)


def test_listing_reads_the_sidecars_not_the_logs(store: SessionStore) -> None:
    add(store, "s1", 1)
    (store.sessions_dir / "s1.jsonl").write_bytes(b"garbage, not even a header")
    assert ids(store.list()[0]) == ["s1"]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(None, id="missing"),
        pytest.param(b"{truncated", id="not-json"),
        pytest.param(b'{"v":1,"kind":"summary"}', id="missing-fields"),
        pytest.param(b'{"v":1,"kind":"summary","session_id":"s1","cwd":7}', id="missing-some"),
        pytest.param(
            b'{"v":1,"kind":"summary","session_id":"s1","cwd":7,"additional_roots":[],'
            b'"title":null,"created_at":"x","updated_at":"2025-01-01T00:00:00.000000Z"}',
            id="wrong-types",
        ),
        pytest.param(
            b'{"v":1,"kind":"summary","session_id":"other","cwd":"/w","additional_roots":[],'
            b'"title":null,"created_at":"x","updated_at":"2025-01-01T00:00:00.000000Z"}',
            id="other-session",
        ),
        pytest.param(b'{"v":2,"kind":"summary"}', id="newer-version"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
    ],
)
def test_a_missing_or_broken_sidecar_is_rebuilt_from_the_log(
    store: SessionStore, damage: bytes | None, caplog: pytest.LogCaptureFixture
) -> None:
    log = store.create(SessionHeader("s1", "/w", ("/lib",), at(1)))
    log.append(TitleRecord("First title"))
    log.append(TitleRecord("Latest title"))
    log.close()
    add(store, "s2", 2)
    sidecar = store.sessions_dir / "s1.meta.json"
    if damage is None:
        sidecar.unlink()
    else:
        sidecar.write_bytes(damage)
    os.utime(store.sessions_dir / "s1.jsonl", (1_800_000_000, 1_800_000_000))

    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        page, _ = store.list()
    rebuilt = SessionSummary(
        "s1", "/w", ("/lib",), "Latest title", at(1), "2027-01-15T08:00:00.000000Z"
    )
    assert page[0] == rebuilt  # updated when the log last changed
    assert ids(page) == ["s1", "s2"]
    assert "rebuilding it from the log" in caplog.text
    assert str(sidecar) in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        assert store.list()[0][0] == rebuilt  # written back: no second warning
    assert caplog.records == []


def test_a_session_whose_log_and_sidecar_are_both_unreadable_is_left_out(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    add(store, "good", 1)
    (store.sessions_dir / "bad.jsonl").write_bytes(b"nonsense\n")
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        assert ids(store.list()[0]) == ["good"]
    assert "cannot rebuild the summary" in caplog.text


def test_stray_files_are_not_sessions(store: SessionStore) -> None:
    add(store, "s1", 1)
    directory = store.sessions_dir
    (directory / "orphan.meta.json").write_bytes((directory / "s1.meta.json").read_bytes())
    (directory / ".s1.meta.json.abc.tmp").write_bytes(b"half written")
    (directory / "bad id.jsonl").write_bytes((encode(TitleRecord("x")) + "\n").encode())
    (directory / "notes.txt").write_text("hello")
    assert ids(store.list()[0]) == ["s1"]


def test_an_amended_archive_and_title_keep_the_activity_time_and_survive_a_lost_sidecar(
    store: SessionStore,
) -> None:
    from acp_agent.sessions.records import ArchiveRecord

    add(store, "a", 1)
    store.amend("a", TitleRecord("Mine", chosen=True), title="Mine")
    store.amend("a", ArchiveRecord(archived=True), archived=True)
    amended = store.summaries()
    (store.sessions_dir / "a.meta.json").unlink()
    rebuilt = store.summaries()  # from the log, with a warning

    assert [(s.title, s.archived, s.updated_at) for s in amended] == [("Mine", True, at(1))]
    assert [(s.title, s.archived) for s in rebuilt] == [("Mine", True)]
    assert store.holder("a") is None  # the log was opened for the amendment only
