"""A log file that cannot be opened never stops the agent: it logs to stderr with one
warning naming the file; `run` says so and keeps the log in a run log; `doctor` checks it.
And `run --log-file F` logs only there: no empty run log beside it.

Every command runs as a subprocess (HOME and the state directory are the autouse
fixture's temporary ones).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from schema_support import assert_frames_from_agent

from acp_agent import paths

TIMEOUT = 30
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
MISSING_DIR_LOG = "/nonexistent/dir/x.log"


def acp_agent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_agent", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def initialize_answer(*args: str, cwd: Path) -> tuple[dict[str, object], str]:
    """Serve ACP as an editor starts it; send `initialize`, read its answer, hang up."""
    process = subprocess.Popen(
        [sys.executable, "-m", "acp_agent", *args],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(INITIALIZE) + "\n")
    process.stdin.flush()
    first_line = process.stdout.readline()
    rest, errors = process.communicate(timeout=TIMEOUT)  # the editor leaves: the agent exits
    frames = [json.loads(line) for line in (first_line + rest).splitlines()]
    assert_frames_from_agent("v1", frames, [INITIALIZE])
    return frames[0], errors


def run_logs() -> list[Path]:
    return sorted((paths.default_state_dir() / "logs").glob("run-*.log"))


def test_an_agent_whose_log_file_cannot_be_opened_still_answers_initialize(
    tmp_path: Path,
) -> None:
    answer, errors = initialize_answer("--log-file", MISSING_DIR_LOG, cwd=tmp_path)
    assert answer["result"]["protocolVersion"] == 1  # type: ignore[index]
    warnings = [line for line in errors.splitlines() if "cannot open the log file" in line]
    assert len(warnings) == 1
    assert MISSING_DIR_LOG in warnings[0] and "logging to stderr" in warnings[0]


def test_the_configs_log_file_that_cannot_be_opened_falls_back_to_stderr(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'log_file = "{MISSING_DIR_LOG}"\n[providers.echo]\ntype = "echo"\n')
    answer, errors = initialize_answer("--config", str(config), cwd=tmp_path)
    assert answer["result"]["protocolVersion"] == 1  # type: ignore[index]
    assert f"cannot open the log file {MISSING_DIR_LOG}" in errors


def test_run_names_a_log_file_it_cannot_write_and_answers_anyway(tmp_path: Path) -> None:
    result = acp_agent("run", "--log-file", MISSING_DIR_LOG, "hi", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == "Echo: hi\n"
    assert f"cannot open the log file {MISSING_DIR_LOG}" in result.stderr
    assert len(run_logs()) == 1  # the agent's log went to a run log instead


def test_run_with_a_log_file_logs_there_and_makes_no_run_log(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    for _ in range(2):
        result = acp_agent("run", "--log-file", str(log), "hi", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    assert run_logs() == []
    text = log.read_text()
    assert text.count("initialize from") == 2  # appended, run after run


def test_doctor_warns_of_a_log_file_it_cannot_write(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'log_file = "{MISSING_DIR_LOG}"\n[providers.echo]\ntype = "echo"\n')
    result = acp_agent("doctor", "--offline", "--config", str(config), cwd=tmp_path)
    line = next(line for line in result.stdout.splitlines() if line.split()[1:2] == ["log"])
    assert line.startswith("warn")
    assert MISSING_DIR_LOG in line


def test_doctor_finds_a_writable_log_file_fine(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    log = tmp_path / "agent.log"
    config.write_text(f'log_file = "{log}"\n[providers.echo]\ntype = "echo"\n')
    result = acp_agent("doctor", "--offline", "--config", str(config), cwd=tmp_path)
    assert f"ok    log        {log} (writable)" in result.stdout
    assert not log.exists()  # checked, not created
