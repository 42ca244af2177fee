"""What the README promises of the command line, tried as a user would (subprocesses):
`run`'s options before `run`, "did you mean" for a misspelt `type` and `--model`, exit 2
for every usage error (`login nope` too), the JSON error object of `-o json`, the exit
codes in `--help`; and what `run` and `doctor` make of MCP servers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 60
EVERYTHING_SERVER = Path(__file__).parent / "mcp_servers" / "everything.py"


def acp_agent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_agent", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


# --- options go anywhere ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--yes", "run", "hi"],
        ["--model", "echo/echo", "run", "hi"],
        ["-m", "echo/echo", "-y", "run", "hi"],
        ["--cwd", ".", "run", "hi"],
        ["run", "hi", "--yes"],
    ],
)
def test_runs_options_work_before_run_as_after_it(tmp_path: Path, args: list[str]) -> None:
    result = acp_agent(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: hi\n"


def test_output_given_before_run_shapes_the_output(tmp_path: Path) -> None:
    result = acp_agent("-o", "json", "run", "hi", cwd=tmp_path)
    assert json.loads(result.stdout)["text"] == "Echo: hi"


def test_runs_options_before_another_command_are_a_usage_error(tmp_path: Path) -> None:
    result = acp_agent("--yes", "models", cwd=tmp_path)
    assert result.returncode == 2
    assert "--yes is an option of run" in result.stderr


# --- did you mean ---------------------------------------------------------------------------


def test_a_misspelt_provider_type_names_the_misspelt_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[providers.echo]\ntpye = "echo"\n')
    result = acp_agent("run", "--config", str(config), "hi", cwd=tmp_path)
    assert result.returncode == 2
    assert "'tpye' is not a key: did you mean 'type'?" in result.stderr


def test_a_misspelt_model_gets_did_you_mean(tmp_path: Path) -> None:
    result = acp_agent("run", "--model", "echo/ecko", "hi", cwd=tmp_path)
    assert result.returncode == 2
    assert "did you mean 'echo/echo'?" in result.stderr


def test_login_to_a_provider_not_configured_is_a_usage_error(tmp_path: Path) -> None:
    result = acp_agent("login", "nope", cwd=tmp_path)
    assert result.returncode == 2
    assert "no provider 'nope' to log in to" in result.stderr


# --- -o json and usage errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["run", "-o", "json", "--model", "nope", "hi"],  # the runner refuses
        ["run", "-o", "json", "--bogus", "hi"],  # the parser refuses
        ["--output=json", "run", "--cwd", "/nonexistent", "hi"],
    ],
)
def test_json_output_prints_an_error_object_for_usage_errors(
    tmp_path: Path, args: list[str]
) -> None:
    result = acp_agent(*args, cwd=tmp_path)
    assert result.returncode == 2
    error = json.loads(result.stdout)
    assert error["type"] == "result" and error["exitCode"] == 2 and error["error"]
    assert error["error"] in result.stderr  # stderr keeps its line


def test_stream_json_prints_the_error_object_on_one_line(tmp_path: Path) -> None:
    result = acp_agent("run", "-o", "stream-json", "--model", "nope", "hi", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stdout.splitlines()
    assert json.loads(line)["exitCode"] == 2


def test_help_lists_the_exit_codes(tmp_path: Path) -> None:
    for args in (["--help"], ["run", "--help"]):
        result = acp_agent(*args, cwd=tmp_path)
        assert "exit codes:" in result.stdout
        for code in ("0", "1", "2", "3", "130", "141"):
            assert f"\n  {code} " in result.stdout


# --- MCP servers ------------------------------------------------------------------------------


def _config_with_servers(tmp_path: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.echo]\ntype = "echo"\n\n'
        '[mcp_servers.fs]\ncommand = "/nonexistent/mcp-server"\n\n'
        f'[mcp_servers.every]\ncommand = "{sys.executable}"\nargs = ["{EVERYTHING_SERVER}"]\n'
    )
    return config


def test_a_failed_mcp_server_is_a_notice_on_stderr_never_in_the_reply(tmp_path: Path) -> None:
    config = str(_config_with_servers(tmp_path))
    result = acp_agent("run", "--config", config, "hi", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: hi\n"
    assert "notice: MCP server 'fs' (/nonexistent/mcp-server): cannot start" in result.stderr
    as_json = acp_agent("run", "--config", config, "-o", "json", "hi", cwd=tmp_path)
    assert json.loads(as_json.stdout)["text"] == "Echo: hi"


def test_doctor_starts_each_mcp_server_and_lists_its_tools_or_the_failure(
    tmp_path: Path,
) -> None:
    config = str(_config_with_servers(tmp_path))
    result = acp_agent("doctor", "--offline", "--timeout", "20", "--config", config, cwd=tmp_path)
    assert result.returncode == 1  # a server that cannot start is a failed check
    lines = [line for line in result.stdout.splitlines() if line[6:16].strip() == "mcp"]
    assert lines[0].startswith("FAIL") and "'fs'" in lines[0] and "cannot start" in lines[0]
    assert lines[1].startswith("ok") and "every (" in lines[1] and " echo," in lines[1]
    assert "Traceback" not in result.stderr


def test_doctor_offline_does_not_contact_remote_mcp_servers(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.echo]\ntype = "echo"\n\n'
        '[mcp_servers.web]\ntype = "http"\nurl = "http://127.0.0.1:9/mcp"\n'
    )
    result = acp_agent("doctor", "--offline", "--config", str(config), cwd=tmp_path)
    assert "skip  mcp        web: --offline: not contacted" in result.stdout
