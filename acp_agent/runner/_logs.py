"""Where the agent's log of each headless run goes: one directory, the newest few kept.

    <state dir>/logs/run-20260101T120000-4242.log      (state dir: `acp_agent.paths`)

Each run writes its agent's stderr to a new file there (owner-only), and the oldest files
past `KEEP` are removed when a run starts. A failed run names its file; `--debug` writes
the log to the terminal instead. When the directory cannot be made (a read-only home),
the system's temporary directory takes its place.
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import suppress
from pathlib import Path

KEEP = 20
"""Run logs kept, the new one included."""
PREFIX = "run-"
SUFFIX = ".log"


def open_run_log(directory: Path | None, keep: int = KEEP) -> tuple[int, Path]:
    """A new log file for this run (an open descriptor and its path), after pruning; in the
    temporary directory when `directory` is None or cannot be used."""
    try:
        if directory is None:
            raise NotADirectoryError("no run log directory")
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        prune(directory, keep - 1)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        path = directory / f"{PREFIX}{stamp}-{os.getpid()}{SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        return fd, path
    except OSError:
        fd, name = tempfile.mkstemp(prefix=f"acp-agent-{PREFIX}", suffix=SUFFIX)
        return fd, Path(name)


def prune(directory: Path, keep: int) -> None:
    """Remove all but the `keep` newest run logs; a file that cannot go stays."""
    logs = sorted(
        (path for path in directory.glob(f"{PREFIX}*{SUFFIX}") if path.is_file()),
        key=_age_key,
    )
    for old in logs[: max(len(logs) - keep, 0)]:
        with suppress(OSError):
            old.unlink()


def _age_key(path: Path) -> tuple[float, str]:
    try:
        return path.stat().st_mtime, path.name
    except OSError:
        return 0.0, path.name
