"""One writer per session: a log open for appending is locked, and another store (another
process, as the kernel sees it: a second open file) is told who has it, and loses nothing.
Plus the redaction of a key stored with `acp-agent login` after the store was made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_agent.child_env import agent_secrets
from acp_agent.config import load_config
from acp_agent.credentials import CredentialStore, StoredKeys
from acp_agent.messages import Message, TextPart
from acp_agent.sessions.errors import SessionLocked
from acp_agent.sessions.records import MessageRecord, SessionHeader, TitleRecord
from acp_agent.sessions.redaction import changing_with
from acp_agent.sessions.store import SessionStore

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock is POSIX")

LATE_KEY = "sk-late-login-0123456789abcdef"


def header(session_id: str = "s1") -> SessionHeader:
    return SessionHeader(session_id, "/w", (), "2025-01-01T00:00:00.000000Z")


def said(text: str) -> MessageRecord:
    return MessageRecord(Message("user", [TextPart(text)]))


def test_a_second_store_cannot_open_a_log_that_is_open_and_is_told_which_process_has_it(
    tmp_path: Path,
) -> None:
    first, second = SessionStore(tmp_path), SessionStore(tmp_path)
    writing = first.create(header())
    writing.append(said("one"))

    with pytest.raises(SessionLocked) as refused:
        second.open_log("s1")
    assert refused.value.pid == os.getpid()
    assert str(refused.value) == (
        f"session 's1' is open in another acp-agent (pid {os.getpid()}); close it there first"
    )
    with pytest.raises(SessionLocked):
        second.delete("s1")

    # Reading needs no lock: list, read and fork work meanwhile, and nothing was lost.
    writing.append(said("two"))
    assert [s.session_id for s in second.summaries()] == ["s1"]
    assert second.read("s1")[1:] == [said("one"), said("two")]
    fork = second.fork("s1", SessionHeader("s2", "/w", (), "2025-01-02T00:00:00.000000Z"))
    fork.close()
    assert second.read("s2")[1:] == [said("one"), said("two")]


def test_once_the_log_is_closed_another_store_opens_it_and_appends_after_what_was_there(
    tmp_path: Path,
) -> None:
    first, second = SessionStore(tmp_path), SessionStore(tmp_path)
    writing = first.create(header())
    writing.append(said("from the first"))
    writing.close()
    assert not (first.sessions_dir / "s1.lock").exists()

    reopened = second.open_log("s1")
    reopened.append(said("from the second"))
    with pytest.raises(SessionLocked):
        first.open_log("s1")  # the roles swapped
    reopened.close()

    assert first.read("s1")[1:] == [said("from the first"), said("from the second")]
    first.delete("s1")
    assert sorted(p.name for p in first.sessions_dir.iterdir()) == []


def test_a_torn_tail_is_not_cut_by_a_store_that_does_not_get_the_lock(tmp_path: Path) -> None:
    first, second = SessionStore(tmp_path), SessionStore(tmp_path)
    writing = first.create(header())
    os.write(writing._require_open(), b'{"v":1,"kind":"title","ti')  # mid-write, as it were
    size = (first.sessions_dir / "s1.jsonl").stat().st_size

    with pytest.raises(SessionLocked):
        second.open_log("s1")
    assert (first.sessions_dir / "s1.jsonl").stat().st_size == size


@pytest.mark.anyio
async def test_a_key_stored_with_login_after_the_store_was_made_never_reaches_its_files(
    tmp_path: Path,
) -> None:
    config_file = tmp_path / "agent.toml"
    config_file.write_text(
        'default_model = "echo/echo"\n'
        '[providers.echo]\ntype = "echo"\n[[providers.echo.models]]\nid = "echo"\n'
        '[providers.openai]\ntype = "openai"\n[[providers.openai.models]]\nid = "gpt-4.1"\n',
        encoding="utf-8",
    )
    credentials = CredentialStore(tmp_path / "config" / "credentials.json")
    config = load_config(str(config_file), {}, StoredKeys(credentials))
    store = SessionStore(
        tmp_path / "state", changing_with(credentials.path, lambda: agent_secrets(config, {}))
    )
    log = store.create(header())
    log.append(said("before the login"))

    credentials.save("openai", LATE_KEY, use_keyring=False)  # `acp-agent login`, meanwhile
    log.append(said(f"my key is {LATE_KEY}, keep it safe"))
    log.append(TitleRecord(f"key {LATE_KEY}"))
    await log.update_summary(title=f"key {LATE_KEY}")
    log.close()

    files = list(store.sessions_dir.iterdir())
    assert {p.suffix for p in files} == {".jsonl", ".json"}
    for path in files:
        assert LATE_KEY.encode() not in path.read_bytes(), path.name
    assert store.read("s1")[2] == said("my key is [redacted], keep it safe")
    assert store.summaries()[0].title == "key [redacted]"
