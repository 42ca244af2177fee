"""Shared by the end-to-end modules: constants, /proc helpers, and the SDK client's start."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

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
V2_DRIVER = E2E_DIR / "v2_client.mjs"
"""The npm SDK's ACP v2 client driving the agent (see its header for the scenarios)."""
V2_SDK = REPO_ROOT / "node_modules" / "@agentclientprotocol" / "sdk" / "dist" / "v2"
needs_v2_sdk = pytest.mark.skipif(
    not V2_SDK.exists() or shutil.which("node") is None,
    reason="the npm SDK is not installed: run `npm install` at the repository root (needs node)",
)


class FrameRecorder:
    """An observer of the SDK connection: every frame that crossed the pipe, by side (as
    dialect_support's `_V1Run` records its script's)."""

    def __init__(self) -> None:
        self.from_agent: list[dict[str, Any]] = []
        self.from_client: list[dict[str, Any]] = []

    def observe(self, event: Any) -> None:
        from acp.connection import StreamDirection

        incoming = event.direction == StreamDirection.INCOMING
        (self.from_agent if incoming else self.from_client).append(event.message)


@asynccontextmanager
async def checked_agent_process(
    client: Any, *command: str, observers: list[Any] | None = None, **kwargs: Any
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process]]:
    """`acp.spawn_agent_process`, and once the connection closes every frame the agent
    sent is checked against the v1 schema (`schema_support.assert_frames_from_agent`):
    the test fails naming the first frame that is not what its definition says."""
    from acp import spawn_agent_process
    from schema_support import assert_frames_from_agent

    recorder = FrameRecorder()
    async with spawn_agent_process(
        client, *command, observers=[recorder.observe, *(observers or [])], **kwargs
    ) as (conn, process):
        yield conn, process
    # only reached when the test's own block passed: its failure stays the one shown
    assert_frames_from_agent("v1", recorder.from_agent, recorder.from_client)


@asynccontextmanager
async def sdk_agent(
    client: Any,
    env: dict[str, str],
    stderr_path: Path,
    cwd: Path,
    *,
    name: str,
    capabilities: Any,
    hang_guard: float,
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process, Any]]:
    """`python -m acp_agent` driven by the `agent-client-protocol` client, `initialize`d
    as v1 with `capabilities`; yields the connection, the process and the answer. The
    agent's stderr is appended to `stderr_path` (shown when a test fails)."""
    from acp.schema import Implementation

    with stderr_path.open("ab") as stderr:
        async with checked_agent_process(
            client, *AGENT_COMMAND, env=env, cwd=cwd, transport_kwargs={"stderr": stderr}
        ) as (conn, process):
            answer = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=1,
                    client_capabilities=capabilities,
                    client_info=Implementation(name=name, version="0.0.0"),
                ),
                hang_guard,
            )
            yield conn, process, answer


async def run_v2_driver(
    env: dict[str, str], stderr: Path, cwd: Path, scenario: str, **scenario_env: str
) -> bytes:
    """What `v2_client.mjs` printed, running `scenario` against a fresh agent in `cwd`."""
    driver = await asyncio.create_subprocess_exec(
        "node",
        str(V2_DRIVER),
        str(cwd),
        str(stderr),
        *AGENT_COMMAND,
        env={**env, "V2_SCENARIO": scenario, **scenario_env},
        cwd=REPO_ROOT,  # where node finds the SDK's package
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await driver.communicate()
    assert driver.returncode == 0, f"the v2 driver failed; agent stderr in {stderr}"
    return out


async def prompt_text(conn: Any, session_id: str, text: str, hang_guard: float) -> Any:
    """One `session/prompt` of plain text; its answer."""
    from acp import text_block

    return await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=[text_block(text)]), hang_guard
    )


def tool(name: str, /, **arguments: Any) -> str:
    """The fake LLM's script for one tool call (see `fake_llm`)."""
    return f"[[tool {name} {json.dumps(arguments)}]]"


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
