"""A process killed with SIGKILL while appending leaves a log that loads.

The child appends records in a tight loop, some of them large (a large `write` is where a
kill can land mid-line), and is killed at a random moment. The log must then read without
error: every complete record present and in order, a torn last line skipped with a warning,
and the session reopened and appended to cleanly.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acp_agent.messages import MessageChunk
from acp_agent.sessions.records import EventRecord, MessageRecord, SessionHeader, TitleRecord
from acp_agent.sessions.store import SessionStore

pytestmark = pytest.mark.skipif(os.name == "nt", reason="SIGKILL is POSIX")

STORE_LOGGER = "acp_agent.sessions.store"
RUNS = 6

CHILD = r"""
import sys
from pathlib import Path

from acp_agent.messages import Message, MessageChunk, TextPart
from acp_agent.sessions.records import EventRecord, MessageRecord, SessionHeader
from acp_agent.sessions.store import SessionStore

store = SessionStore(Path(sys.argv[1]))
log = store.create(SessionHeader("crash", "/w", (), "2025-01-01T00:00:00.000000Z"))
print("ready", flush=True)
n = 0
while True:
    text = f"record {n} " + "x" * (300_000 if n % 5 == 3 else 50)
    if n % 2:
        log.append(EventRecord(MessageChunk(text, f"m{n}")))
    else:
        log.append(MessageRecord(Message("assistant", [TextPart(text)]), f"m{n}"))
    n += 1
"""


def run_and_kill(directory: Path, delay: float) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready = child.stdout.readline()
        if ready != "ready\n":
            child.kill()
            _, errors = child.communicate(timeout=10)
            pytest.fail(f"the child did not start: {ready!r} {errors}")
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()
        if child.stderr is not None:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL


def record_number(record: object) -> int:
    if isinstance(record, MessageRecord):
        text = record.message.text
    else:
        assert isinstance(record, EventRecord)
        assert isinstance(record.event, MessageChunk)
        text = record.event.text
    return int(text.split(" ", 2)[1])


def check_log(store: SessionStore, caplog: pytest.LogCaptureFixture) -> int:
    """Read the killed child's log; the number of complete records found."""
    path = store.sessions_dir / "crash.jsonl"
    data = path.read_bytes()
    torn = not data.endswith(b"\n")
    complete = data.count(b"\n") - 1  # the header's line is not a record
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        records = store.read("crash")
    assert records[0] == SessionHeader("crash", "/w", (), "2025-01-01T00:00:00.000000Z")
    numbers = [record_number(r) for r in records[1:]]
    assert numbers == list(range(complete))
    warnings = [r.getMessage() for r in caplog.records]
    if torn:
        assert len(warnings) == 1
        assert f"{path}:{complete + 2}: skipping a torn last record" in warnings[0]
    else:
        assert warnings == []
    return complete


@pytest.mark.parametrize("run", range(RUNS))
def test_a_log_killed_mid_append_loads_every_complete_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, run: int
) -> None:
    delay = random.uniform(0.02, 0.25)
    run_and_kill(tmp_path, delay)
    store = SessionStore(tmp_path)
    complete = check_log(store, caplog)
    assert complete > 0, f"nothing written in {delay:.3f} s"

    # The kill lands between two writes more often than inside one: when it did not tear
    # the last line, tear it here (in half, as a kill inside its write would).
    path = store.sessions_dir / "crash.jsonl"
    data = path.read_bytes()
    if data.endswith(b"\n") and complete > 0:
        last_start = data.rstrip(b"\n").rfind(b"\n") + 1
        path.write_bytes(data[: last_start + (len(data) - last_start) // 2])
        assert check_log(store, caplog) == complete - 1

    # Reopening cuts the torn tail off; what is appended next loads without a warning.
    log = store.open_log("crash")
    log.append(TitleRecord("after the crash"))
    log.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=STORE_LOGGER):
        records = store.read("crash")
    assert records[-1] == TitleRecord("after the crash")
    assert caplog.records == []
