"""`acpx` (the npm headless ACP client, pinned in package.json) driving `python -m acp_agent`
through `frame_tap.py`, and every frame the agent sent checked against the v1 schema.

Run `npm install` at the repository root first; without `node_modules/.bin/acpx` the tests
that use it are skipped.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from e2e_support import AGENT_COMMAND, E2E_DIR, REPO_ROOT
from frame_tap import RECORD_DIR_VARIABLE
from schema_support import assert_frames_from_agent, negotiated_dialect

ACPX = REPO_ROOT / "node_modules" / ".bin" / "acpx"
needs_acpx = pytest.mark.skipif(
    not ACPX.exists() or shutil.which("node") is None,
    reason="acpx is not installed: run `npm install` at the repository root (needs node)",
)
TAP = (sys.executable, str(E2E_DIR / "frame_tap.py"))
TAP_EXIT_GUARD = 20.0
"""Seconds an agent may run on after acpx exited (`--ttl 1` keeps it a second idle)."""


def run_acpx(
    env: dict[str, str],
    cwd: Path,
    *arguments: str,
    options: Sequence[str] = ("--approve-all",),
    output: str = "json",
    agent_options: Sequence[str] = (),
    timeout: int = 30,
) -> subprocess.CompletedProcess[str]:
    """`acpx OPTIONS --format OUTPUT ... ARGUMENTS` against our agent (with `agent_options`);
    never lingers (`--ttl 1`). Once acpx and the agents it started have exited, every frame
    each agent sent is checked (`check_recorded_frames`): the run fails naming the first
    frame its definition does not allow."""
    format_args = (
        ["--format", "json", "--json-strict"] if output == "json" else ["--format", output]
    )
    with tempfile.TemporaryDirectory(prefix="acpx-frames-") as record_dir:
        agent = shlex.join([*TAP, *AGENT_COMMAND, *agent_options])
        command = [
            str(ACPX),
            *options,
            *format_args,
            "--cwd",
            str(cwd),
            "--ttl",
            "1",
            "--timeout",
            str(timeout),
            "--agent",
            agent,
            *arguments,
        ]
        done = subprocess.run(
            command,
            env={**env, RECORD_DIR_VARIABLE: record_dir},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=2 * timeout,
            check=False,
        )
        recordings = sorted(Path(record_dir).glob("*.from-agent.jsonl"))
        assert recordings, f"acpx started no agent through the tap; its stderr: {done.stderr}"
        for from_agent_file in recordings:
            check_recorded_frames(from_agent_file)
    return done


def check_recorded_frames(from_agent_file: Path) -> None:
    """The agent the tap recorded in `from_agent_file` (and its neighbours) spoke v1 (its
    `initialize` answer says so) and sent only frames the v1 schema defines
    (`assert_frames_from_agent`)."""
    tap = from_agent_file.name.removesuffix(".from-agent.jsonl")
    wait_for_tap_exit(from_agent_file.with_name(f"{tap}.exit"))
    from_agent = read_frames(from_agent_file)
    from_client = read_frames(from_agent_file.with_name(f"{tap}.from-client.jsonl"))
    assert negotiated_dialect(from_agent, from_client) == "v1", "acpx speaks ACP v1"
    assert_frames_from_agent("v1", from_agent, from_client)


def wait_for_tap_exit(exit_file: Path) -> None:
    """Polls: the tap is acpx's child, not ours, so its end is no event we can wait on."""
    deadline = time.monotonic() + TAP_EXIT_GUARD
    while not exit_file.exists():
        assert time.monotonic() < deadline, f"the agent behind {exit_file} never exited"
        time.sleep(0.05)


def read_frames(path: Path) -> list[dict[str, Any]]:
    """The JSON-RPC frames of one direction: one JSON object a line (NDJSON)."""
    frames = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            frames.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise AssertionError(f"not a JSON-RPC frame ({error}): {line[:2000]}") from None
    return frames
