"""`acp-agent run` for scripts: the prompt from stdin, `--model`, `--output json|stream-json`,
options in any position, the status line on a terminal, the run logs; and the one-line
hint of bare `acp-agent` on a terminal.

The end-to-end tests start `acp-agent` as a real subprocess on the offline echo provider
(the autouse fixture clears API keys and points HOME and XDG_* at a temporary directory).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acp_agent import paths
from acp_agent.runner import _logs
from acp_agent.runner._status import CLEAR_LINE, format_elapsed, format_status

TIMEOUT = 30
TWO_ECHO_PROVIDERS = """
[providers.one]
type = "echo"
models = [{ id = "fast" }]

[providers.two]
type = "echo"
models = [{ id = "slow" }]
"""


def acp_agent(
    *args: str, cwd: Path, input: str | None = None, stdin: int | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_agent", *args],
        cwd=cwd,
        input=input,
        stdin=stdin if input is None else None,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def run_logs() -> list[Path]:
    return sorted((paths.default_state_dir() / "logs").glob("run-*.log"))


# --- the prompt from stdin ----------------------------------------------------------------


def test_a_dash_reads_the_prompt_from_stdin(tmp_path: Path) -> None:
    result = acp_agent("run", "-", cwd=tmp_path, input="from the pipe\n")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: from the pipe\n"


def test_with_no_prompt_a_piped_stdin_is_the_prompt(tmp_path: Path) -> None:
    result = acp_agent("run", cwd=tmp_path, input="piped words")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: piped words\n"


def test_words_and_stdin_combine_with_stdin_on_lines_of_its_own(tmp_path: Path) -> None:
    result = acp_agent("run", "Explain", "this:", "-", cwd=tmp_path, input="  indented\nnext\n")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: Explain this:\n  indented\nnext\n"


def test_an_empty_stdin_is_a_usage_error_and_starts_nothing(tmp_path: Path) -> None:
    result = acp_agent("run", cwd=tmp_path, stdin=subprocess.DEVNULL)

    assert result.returncode == 2
    assert "acp-agent: the prompt is empty" in result.stderr
    assert run_logs() == []


def test_a_prompt_read_from_stdin_leaves_no_terminal_to_ask_on(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret\n")
    try:
        result = acp_agent(
            "run", "-", cwd=tmp_path, input=f'@tool read_file {{"path": "{outside}"}}'
        )
    finally:
        outside.unlink()

    assert result.returncode == 0, result.stderr
    assert "permission rejected" in result.stderr
    assert "secret" not in result.stdout


# --- --model --------------------------------------------------------------------------------


def test_model_switches_the_session_to_the_named_model(tmp_path: Path) -> None:
    config = tmp_path / "two.toml"
    config.write_text(TWO_ECHO_PROVIDERS)

    by_choice = acp_agent(
        "run", "--config", str(config), "--model", "two/slow", "/model", cwd=tmp_path
    )
    by_id = acp_agent("run", "/model", "-m", "slow", "--config", str(config), cwd=tmp_path)

    for result in (by_choice, by_id):
        assert result.returncode == 0, result.stderr
        assert "- two/slow  (current)" in result.stdout
        assert "using two/slow from" in result.stderr


def test_an_unknown_model_exits_2_listing_the_configured_ones(tmp_path: Path) -> None:
    config = tmp_path / "two.toml"
    config.write_text(TWO_ECHO_PROVIDERS)

    result = acp_agent("run", "--config", str(config), "--model", "nope", "hi", cwd=tmp_path)

    assert result.returncode == 2
    assert "--model: no model 'nope' is configured; configured: one/fast, two/slow" in (
        result.stderr
    )
    assert result.stdout == ""


# --- --output -------------------------------------------------------------------------------

RESULT_KEYS = {
    "type",
    "stopReason",
    "exitCode",
    "text",
    "usage",
    "cost",
    "toolCalls",
    "sessionId",
    "model",
    "durationMs",
    "error",
}


def test_output_json_prints_one_object_with_text_stop_reason_usage_and_tool_calls(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n")

    result = acp_agent(
        "run", "--output", "json", 'read\n@tool read_file {"path": "notes.txt"}', cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)  # stdout holds the object and nothing else
    assert set(report) >= RESULT_KEYS
    assert report["type"] == "result"
    assert (report["stopReason"], report["exitCode"], report["error"]) == ("end_turn", 0, None)
    assert report["model"] == "echo/echo"
    assert report["sessionId"].startswith("sess_")
    assert "alpha" in report["text"]
    assert report["usage"]["size"] == 32768 and report["usage"]["used"] > 0
    assert report["cost"] is None  # the echo model has no prices
    (call,) = report["toolCalls"]
    assert call["kind"] == "read"
    assert call["status"] == "completed"
    assert call["rawInput"] == {"path": "notes.txt"}
    assert call["title"].startswith("Read notes.txt")
    assert "→ Read notes.txt" in result.stderr  # notices stay on stderr


def test_output_json_reports_a_short_stop_with_its_exit_code(tmp_path: Path) -> None:
    result = acp_agent("run", "-o", "json", "hi\n@stop max_tokens", cwd=tmp_path)

    assert result.returncode == 3
    report = json.loads(result.stdout)
    assert (report["stopReason"], report["exitCode"]) == ("max_tokens", 3)


def test_output_stream_json_prints_one_event_per_line_as_they_happen(tmp_path: Path) -> None:
    result = acp_agent("run", "hello there", "--output", "stream-json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    events: list[dict[str, Any]] = [json.loads(line) for line in result.stdout.splitlines()]
    first, *updates, last = events
    assert first == {
        "type": "session",
        "sessionId": last["sessionId"],
        "model": "echo/echo",
        "cwd": str(tmp_path),
    }
    assert {event["type"] for event in updates} == {"update"}
    kinds = [event["update"]["sessionUpdate"] for event in updates]
    assert "agent_message_chunk" in kinds and "usage_update" in kinds
    chunks = [
        event["update"]["content"]["text"]
        for event in updates
        if event["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(chunks) == "Echo: hello there"
    assert set(last) >= RESULT_KEYS
    assert (last["type"], last["text"], last["exitCode"]) == ("result", "Echo: hello there", 0)


def test_output_stream_json_streams_before_the_turn_ends(tmp_path: Path) -> None:
    words = " ".join(f"w{n}" for n in range(8))
    run = subprocess.Popen(
        [sys.executable, "-m", "acp_agent", "run", "-o", "stream-json", f"@slow 0.3\n{words}"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert run.stdout is not None
        seen = []
        while not any('"agent_message_chunk"' in line for line in seen):
            seen.append(run.stdout.readline())
            assert seen[-1], "stdout ended before the first chunk"
        assert run.poll() is None  # the first chunk came while the turn still ran
        rest, _ = run.communicate(timeout=TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert json.loads(rest.splitlines()[-1])["text"].endswith("w7")


# --- options in any position ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--log-level", "debug", "hello", "there"],
        ["run", "hello", "--log-level", "debug", "there"],
        ["--log-level", "debug", "run", "hello", "there"],
        ["run", "hello", "there", "--yes", "--cwd", "."],
    ],
)
def test_options_work_before_between_and_after_the_prompt(args: list[str], tmp_path: Path) -> None:
    result = acp_agent(*args, cwd=tmp_path, stdin=subprocess.DEVNULL)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: hello there\n"


def test_config_works_before_and_after_the_command(tmp_path: Path) -> None:
    config = tmp_path / "two.toml"
    config.write_text(TWO_ECHO_PROVIDERS)

    before = acp_agent("--config", str(config), "run", "hi", cwd=tmp_path)
    after = acp_agent("run", "hi", "--config", str(config), cwd=tmp_path)

    for result in (before, after):
        assert result.returncode == 0, result.stderr
        assert f"using one/fast from {config}" in result.stderr


def test_an_unknown_option_is_a_usage_error(tmp_path: Path) -> None:
    result = acp_agent("run", "hi", "--colour", cwd=tmp_path)

    assert result.returncode == 2
    assert "unrecognized arguments: --colour" in result.stderr


# --- the status line --------------------------------------------------------------------------


def read_all(fd: int, process: subprocess.Popen[bytes]) -> bytes:
    """Everything written to the terminal `fd` until `process` exits."""
    seen = bytearray()
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the other side closed (Linux says EIO)
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    return bytes(seen)


def test_on_a_terminal_stderr_shows_the_model_elapsed_time_and_running_tool(
    tmp_path: Path,
) -> None:
    prompt = '@tool shell {"command": "sleep 1.5"}'
    controller, terminal = pty.openpty()
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "acp_agent", "run", "--yes", prompt],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
        )
        os.close(terminal)
        screen = read_all(controller, run).decode()
        out, _ = run.communicate(timeout=TIMEOUT)
    finally:
        os.close(controller)

    assert run.returncode == 0, screen
    statuses = screen.split(CLEAR_LINE)
    assert any(s.startswith("⠋ echo/echo · 0s · waiting for the model") for s in statuses)
    assert any(re.search(r"^. echo/echo · \d+s · running: sleep 1\.5$", s) for s in statuses)
    # Wiped before the end (the last write clears the line), so the shell starts clean.
    assert statuses[-1] == "" or statuses[-1].endswith("✓ sleep 1.5\r\n"), screen
    assert b"\x1b[" not in out  # the reply on stdout never carries it


def test_piped_stderr_never_gets_the_status_line(tmp_path: Path) -> None:
    result = acp_agent("run", "@slow 0.3\none two three", cwd=tmp_path)

    assert result.returncode == 0
    assert "\x1b[" not in result.stderr
    assert "waiting for the model" not in result.stderr


def test_the_status_text_shows_model_time_and_tool_within_the_width() -> None:
    assert format_status("openai/gpt-4.1", 12.7, None, frame=2) == (
        "⠹ openai/gpt-4.1 · 12s · waiting for the model"
    )
    assert (
        format_status("a/b", 75, "Read /src/app.py") == "⠋ a/b · 1m15s · running: Read /src/app.py"
    )
    narrow = format_status("a/b", 1, "x" * 200, width=40)
    assert len(narrow) == 39 and narrow.endswith("…")
    assert [format_elapsed(s) for s in (0, 59.9, 60, 3599, 3600, 7322)] == [
        "0s",
        "59s",
        "1m00s",
        "59m59s",
        "1h00m",
        "2h02m",
    ]


# --- run logs ---------------------------------------------------------------------------------


def test_each_run_keeps_its_agent_log_in_the_state_directory(tmp_path: Path) -> None:
    for _ in range(2):
        assert acp_agent("run", "hi", cwd=tmp_path, stdin=subprocess.DEVNULL).returncode == 0

    logs = run_logs()
    assert len(logs) == 2
    assert all(log.parent == paths.default_state_dir() / "logs" for log in logs)
    assert all(log.stat().st_mode & 0o777 == 0o600 for log in logs)
    assert "configuration" in logs[-1].read_text()  # the agent's own log lines


def test_old_run_logs_are_pruned_to_the_newest_few(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    for number in range(25):
        old = directory / f"run-2026010{number:02d}-1.log"
        old.write_text("old")
        os.utime(old, (1_000_000 + number, 1_000_000 + number))
    (directory / "notes.txt").write_text("not a run log")

    fd, new = _logs.open_run_log(directory, keep=20)
    os.close(fd)

    kept = sorted(path.name for path in directory.glob("run-*.log"))
    assert len(kept) == 20
    assert new.name in kept
    assert "run-202601005-1.log" not in kept and "run-202601024-1.log" in kept
    assert (directory / "notes.txt").exists()


def test_an_unusable_log_directory_falls_back_to_the_temporary_directory(
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("in the way")

    fd, path = _logs.open_run_log(blocked / "logs")
    os.close(fd)
    try:
        assert path.parent != blocked
        assert path.name.startswith("acp-agent-run-")
    finally:
        path.unlink()


# --- bare acp-agent on a terminal -------------------------------------------------------------


def test_bare_acp_agent_on_a_terminal_prints_a_one_line_hint(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "acp_agent"],
            cwd=tmp_path,
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.close(terminal)
        assert run.stderr is not None
        hint = run.stderr.readline().decode()
        os.write(controller, b"\x04")  # Ctrl-D: end of input, as a person would quit
        out, _ = run.communicate(timeout=TIMEOUT)
    finally:
        os.close(controller)

    assert hint.startswith("acp-agent: serving ACP on stdin/stdout")
    assert 'acp-agent run "Say hello"' in hint
    assert run.returncode == 0
    assert out == b""  # stdout carries protocol frames only


def test_bare_acp_agent_started_by_an_editor_prints_no_hint(tmp_path: Path) -> None:
    result = acp_agent(cwd=tmp_path, input="")

    assert result.returncode == 0
    assert "serving ACP" not in result.stderr
