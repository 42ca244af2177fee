"""`acp-agent sessions list|show|delete|prune`, the runs `acp-agent run` marks as such, the
retention the agent applies when it starts, and editor sessions that never got a prompt.

Every test drives real processes on the offline echo provider, as a user would: `acp-agent
run` to make sessions, `acp-agent sessions ...` to manage them, and a plain `acp-agent`
(served over a pipe, spoken to as an editor would) to hold sessions open. The autouse
fixture points XDG_STATE_HOME at a temporary directory, so the store starts empty.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from schema_support import assert_frames_from_agent

from acp_agent import paths

TIMEOUT = 30


def acp_agent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_agent", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def run(prompt: str, cwd: Path) -> str:
    """One `acp-agent run` in `cwd`; the id of the session it stored."""
    result = acp_agent("run", "-o", "json", "--cwd", str(cwd), prompt, cwd=cwd)
    assert result.returncode == 0, result.stderr
    session_id: str = json.loads(result.stdout)["sessionId"]
    return session_id


def listed(cwd: Path, *args: str) -> list[dict[str, Any]]:
    result = acp_agent("sessions", "list", "--json", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    items: list[dict[str, Any]] = json.loads(result.stdout)
    return items


def sessions_dir() -> Path:
    return paths.default_state_dir() / "sessions"


def stored_files() -> list[str]:
    directory = sessions_dir()
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def backdate(session_id: str, days: int) -> None:
    """Make the session look inactive for `days` (the sidecar's `updated_at` is its age)."""
    sidecar = sessions_dir() / f"{session_id}.meta.json"
    data = json.loads(sidecar.read_text())
    moment = datetime.now(UTC) - timedelta(days=days)
    data["updated_at"] = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    sidecar.write_text(json.dumps(data))


class Editor:
    """A plain `acp-agent` served over a pipe, spoken to as an editor speaks to it; every
    frame the agent writes is checked against the v1 schema."""

    def __init__(self, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_agent"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._ids = iter(range(1, 1_000_000))
        self._buffer = b""
        self._sent: list[dict[str, Any]] = []
        self.call("initialize", {"protocolVersion": 1})

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; its response (what arrives before it is passed over)."""
        request_id = next(self._ids)
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self._sent.append(frame)
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            message = self._next()
            if message.get("id") == request_id and "method" not in message:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result

    def new_session(self, cwd: Path) -> str:
        session_id: str = self.call("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
        return session_id

    def prompt(self, session_id: str, text: str) -> None:
        prompt = [{"type": "text", "text": text}]
        self.call("session/prompt", {"sessionId": session_id, "prompt": prompt})

    def exit(self) -> int:
        """Close its input, as an editor that quits does; its exit status."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        rest, self._buffer = self._buffer + self.process.stdout.read(), b""
        self._check([json.loads(line) for line in rest.splitlines()])
        return self.process.wait(timeout=TIMEOUT)

    def _next(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                raise AssertionError("the agent stopped answering")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        self._check([message])
        return message

    def _check(self, frames: list[dict[str, Any]]) -> None:
        assert_frames_from_agent("v1", frames, self._sent)


@contextmanager
def editor(cwd: Path) -> Iterator[Editor]:
    agent = Editor(cwd)
    try:
        yield agent
    finally:
        if agent.process.poll() is None:
            agent.exit()


# --- list ------------------------------------------------------------------------------------


def test_runs_are_listed_newest_first_marked_as_runs_and_filtered_by_cwd(
    tmp_path: Path,
) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    first = run("first question", here)
    second = run("second question", there)

    everything = listed(tmp_path)
    only_there = listed(tmp_path, "--cwd", str(there))
    table = acp_agent("sessions", "list", cwd=tmp_path)

    assert [item["sessionId"] for item in everything] == [second, first]
    assert [item["title"] for item in everything] == ["second question", "first question"]
    assert {item["origin"] for item in everything} == {"run"}
    assert not any(item["open"] for item in everything)
    assert [item["sessionId"] for item in only_there] == [second]
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "UPDATED", "ORIGIN", "TITLE", "(CWD)"]
    assert lines[1].startswith(second) and f"run      second question ({there})" in lines[1]
    assert lines[2].startswith(first)


def test_an_empty_store_says_where_it_looked(tmp_path: Path) -> None:
    result = acp_agent("sessions", "list", cwd=tmp_path)

    assert result.returncode == 0
    assert result.stdout == f"No stored sessions ({sessions_dir()}).\n"
    assert listed(tmp_path) == []


# --- show ------------------------------------------------------------------------------------


def test_show_prints_the_conversation_with_its_tool_calls_as_text(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    session_id = run('@tool read_file {"path": "notes.txt"}', tmp_path)

    result = acp_agent("sessions", "show", session_id, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f'session {session_id}: @tool read_file {{"path": "notes.txt"}}'
    assert lines[1].startswith(f"  acp-agent run in {tmp_path}, started ")
    assert 'user: @tool read_file {"path": "notes.txt"}' in lines
    assert 'tool call: read_file {"path": "notes.txt"}' in lines
    assert any(line.startswith("  result: ") and "alpha" in line for line in lines)
    assert any(line.startswith("assistant: ") for line in lines)


def test_show_of_an_unknown_id_fails_in_one_line(tmp_path: Path) -> None:
    result = acp_agent("sessions", "show", "sess_nope", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"acp-agent sessions: no stored session 'sess_nope' in {sessions_dir()} "
        "(see `sessions list`)\n"
    )


# --- delete ----------------------------------------------------------------------------------


def test_delete_removes_each_session_s_files_and_names_the_unknown_ones(tmp_path: Path) -> None:
    gone, also_gone, kept = run("one", tmp_path), run("two", tmp_path), run("three", tmp_path)

    result = acp_agent("sessions", "delete", gone, "sess_nope", also_gone, cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout == f"Deleted {gone}.\nDeleted {also_gone}.\n"
    assert "no stored session 'sess_nope'" in result.stderr
    assert stored_files() == [f"{kept}.jsonl", f"{kept}.meta.json"]


# --- prune -----------------------------------------------------------------------------------


def test_prune_keeps_the_most_recent_and_removes_the_inactive(tmp_path: Path) -> None:
    oldest, old, newer, newest = (run(f"prompt {n}", tmp_path) for n in range(4))
    backdate(oldest, 40)
    backdate(old, 31)

    dry = acp_agent("sessions", "prune", "--older-than", "30d", "--dry-run", cwd=tmp_path)
    after_dry = stored_files()
    by_age = acp_agent("sessions", "prune", "--older-than", "30d", cwd=tmp_path)
    after_age = [item["sessionId"] for item in listed(tmp_path)]
    by_count = acp_agent("sessions", "prune", "--keep", "1", cwd=tmp_path)

    assert dry.returncode == 0 and len(after_dry) == 8
    assert "0 sessions" not in dry.stdout and "none deleted (--dry-run)" in dry.stdout
    assert by_age.returncode == 0
    assert by_age.stdout.splitlines()[-1] == (
        "Deleted 2 sessions (inactive over 30d, or never prompted)."
    )
    assert sorted(after_age) == sorted([newer, newest])
    assert by_count.returncode == 0
    assert [item["sessionId"] for item in listed(tmp_path)] == [newest]


def test_prune_without_a_rule_applies_the_configured_retention(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('session_retention_days = 7\n[providers.echo]\ntype = "echo"\n')
    stale, fresh = run("stale", tmp_path), run("fresh", tmp_path)
    backdate(stale, 8)

    result = acp_agent("sessions", "prune", "--config", str(config), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"Deleted {stale} (stale)\nDeleted 1 session (inactive over 7 days, or never prompted).\n"
    )
    assert [item["sessionId"] for item in listed(tmp_path)] == [fresh]


def test_prune_by_origin_leaves_the_other_kind_alone(tmp_path: Path) -> None:
    old_run = run("a run", tmp_path)
    with editor(tmp_path) as agent:
        old_chat = agent.new_session(tmp_path)
        agent.prompt(old_chat, "an editor session")
    backdate(old_run, 100)
    backdate(old_chat, 100)

    editors = acp_agent(
        "sessions", "prune", "--origin", "editor", "--older-than", "1w", cwd=tmp_path
    )

    assert editors.returncode == 0, editors.stderr
    assert [(i["sessionId"], i["origin"]) for i in listed(tmp_path)] == [(old_run, "run")]


def test_a_bad_duration_is_a_usage_error_naming_the_forms(tmp_path: Path) -> None:
    run("kept", tmp_path)

    result = acp_agent("sessions", "prune", "--older-than", "3 months", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr == (
        "acp-agent sessions prune: --older-than: not a duration: '3 months' "
        "(a number and a unit: 30d, 12h, 2w, 90m, 45s)\n"
    )
    assert len(listed(tmp_path)) == 1


def test_a_dry_run_with_zero_age_or_keep_zero_lists_what_the_prune_then_removes(
    tmp_path: Path,
) -> None:
    # `--older-than 0s` and `--keep 0` are rules (both falsy values): the dry run once
    # listed nothing for them while the real prune removed every session.
    first, second = (run(f"prompt {n}", tmp_path) for n in range(2))

    by_age = acp_agent("sessions", "prune", "--older-than", "0s", "--dry-run", cwd=tmp_path)
    by_count = acp_agent("sessions", "prune", "--keep", "0", "--dry-run", cwd=tmp_path)
    pruned = acp_agent("sessions", "prune", "--older-than", "0s", cwd=tmp_path)

    for dry in (by_age, by_count):
        assert dry.returncode == 0
        assert f"Would delete {first}" in dry.stdout and f"Would delete {second}" in dry.stdout
        assert "2 sessions" in dry.stdout.splitlines()[-1]
    assert pruned.stdout.splitlines()[-1] == (
        "Deleted 2 sessions (inactive over 0s, or never prompted)."
    )
    assert listed(tmp_path) == []


# --- sessions open in a running agent ----------------------------------------------------------


def test_a_session_open_in_a_running_agent_is_never_deleted_or_pruned(tmp_path: Path) -> None:
    with editor(tmp_path) as agent:
        session_id = agent.new_session(tmp_path)
        agent.prompt(session_id, "still working")
        backdate(session_id, 400)
        shown = listed(tmp_path)
        deleted = acp_agent("sessions", "delete", session_id, cwd=tmp_path)
        pruned = acp_agent("sessions", "prune", "--keep", "0", cwd=tmp_path)
        files_meanwhile = stored_files()
        agent.prompt(session_id, "and on")  # the agent's log is whole still

    assert [(i["sessionId"], i["open"], i["origin"]) for i in shown] == [
        (session_id, True, "editor")
    ]
    assert deleted.returncode == 1
    assert (
        "not deleted: session" in deleted.stderr
        and "is open in another acp-agent" in deleted.stderr
    )
    assert pruned.returncode == 0
    assert f"kept {session_id}: open in a running agent" in pruned.stderr
    assert pruned.stdout.splitlines()[-1].startswith("Deleted 0 sessions")
    assert f"{session_id}.jsonl" in files_meanwhile
    assert listed(tmp_path)[0]["sessionId"] == session_id


# --- sessions nobody prompted ---------------------------------------------------------------


def test_a_session_never_prompted_is_listed_only_while_open_and_can_still_be_resumed(
    tmp_path: Path,
) -> None:
    with editor(tmp_path) as agent:
        bare = agent.new_session(tmp_path)
        used = agent.new_session(tmp_path)
        agent.prompt(used, "hello")
        in_list = {s["sessionId"] for s in agent.call("session/list", {})["sessions"]}
        assert agent.exit() == 0

    with editor(tmp_path) as agent:
        listed_later = {s["sessionId"] for s in agent.call("session/list", {})["sessions"]}
        # A client that named it (acpx `sessions new --name`) resumes it by its id.
        agent.call("session/resume", {"sessionId": bare, "cwd": str(tmp_path), "mcpServers": []})
        assert agent.exit() == 0

    assert in_list == {bare, used}
    assert listed_later == {used}


# --- retention when the agent starts -----------------------------------------------------------


@pytest.mark.parametrize("retention", [None, 0])
def test_the_agent_removes_sessions_past_the_retention_when_it_starts(
    tmp_path: Path, retention: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    setting = "" if retention is None else f"session_retention_days = {retention}\n"
    config.write_text(f'{setting}[providers.echo]\ntype = "echo"\n')
    monkeypatch.setenv("ACP_AGENT_CONFIG", str(config))
    stale, recent = run("stale", tmp_path), run("recent", tmp_path)
    backdate(stale, 91)

    with editor(tmp_path) as agent:
        # The sweep runs beside the requests; the agent finishes it before it exits.
        listed_live = {s["sessionId"] for s in agent.call("session/list", {})["sessions"]}
        status = agent.exit()

    assert status == 0
    assert recent in listed_live
    remaining = {item["sessionId"] for item in listed(tmp_path)}
    assert remaining == ({recent} if retention is None else {stale, recent})
