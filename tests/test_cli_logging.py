"""Logging obeys the command line: `--log-file` / `--log-level` are never replaced by the
config file's `log_file` / `log_level`, which only fill in what the command line left out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from schema_support import assert_frames_from_agent

TIMEOUT = 30


def serve_one_session(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Start the agent, open a session (so the config is fully loaded), end the input."""
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(tmp_path), "mcpServers": []},
        },
    ]
    stdin = b"".join(json.dumps(frame).encode() + b"\n" for frame in frames)
    done = subprocess.run(
        [sys.executable, "-m", "acp_agent", *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r.get("id") for r in replies if "id" in r] == [1, 2], done.stderr.decode()
    assert all("error" not in r for r in replies), replies
    assert_frames_from_agent("v1", replies, frames)
    return done


def config_with_logging(tmp_path: Path, log_file: Path, level: str) -> Path:
    config = tmp_path / "agent.toml"
    config.write_text(
        f'log_file = "{log_file}"\nlog_level = "{level}"\n\n[providers.echo]\ntype = "echo"\n'
    )
    return config


def test_the_command_line_log_file_and_level_win_over_the_config(tmp_path: Path) -> None:
    from_config = tmp_path / "config.log"
    from_cli = tmp_path / "cli.log"
    config = config_with_logging(tmp_path, from_config, "error")

    serve_one_session(
        tmp_path, "--config", str(config), "--log-file", str(from_cli), "--log-level", "info"
    )

    logged = from_cli.read_text()
    assert "initialize from" in logged
    assert "configuration:" in logged  # logged after the config was loaded: still here
    assert not from_config.exists()


def test_the_config_log_file_applies_from_the_start_when_the_command_line_names_none(
    tmp_path: Path,
) -> None:
    from_config = tmp_path / "config.log"
    config = config_with_logging(tmp_path, from_config, "info")

    done = serve_one_session(tmp_path, "--config", str(config))

    logged = from_config.read_text()
    assert "initialize from" in logged  # before the config's full load
    assert "configuration:" in logged
    assert b"initialize from" not in done.stderr


def test_the_command_line_level_applies_to_the_config_log_file(tmp_path: Path) -> None:
    from_config = tmp_path / "config.log"
    config = config_with_logging(tmp_path, from_config, "debug")

    serve_one_session(tmp_path, "--config", str(config), "--log-level", "warning")

    logged = from_config.read_text() if from_config.exists() else ""
    assert "configuration:" not in logged  # info, logged after the config was loaded
