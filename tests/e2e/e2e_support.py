"""Shared by the end-to-end modules: constants and /proc helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parent.parent
for _path in (E2E_DIR, E2E_DIR.parent):  # e2e_support and fake_llm, however pytest imports
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

API_KEY = "test-key"
MODEL = "fake-model"
HELLO_TEXT = "Hello from the e2e workspace!\nSecond line.\n"
AGENT_COMMAND = (sys.executable, "-m", "acp_agent")


def processes_with_env(name: str, value: str) -> list[int]:
    """Pids of live processes whose environment has `name=value` (Linux /proc)."""
    wanted = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = _proc_state(entry)
        except OSError:
            continue
        if state != "Z" and wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def children_of(pid: int) -> list[int]:
    """Pids of the live processes whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def is_alive(pid: int) -> bool:
    try:
        return _proc_state(Path("/proc", str(pid))) != "Z"
    except OSError:
        return False


def _proc_state(entry: Path) -> str:
    return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
