"""`acp-agent run`: the headless client, end to end and helper by helper.

The end-to-end tests start `acp-agent run` as a real subprocess, which starts the agent as
its own subprocess with the offline echo provider (the autouse fixture clears API keys).
"""

from __future__ import annotations

import argparse
import io
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import anyio
import pytest

from acp_agent.rpc.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from acp_agent.runner import _headless, run_headless
from acp_agent.runner._client import Permissions
from acp_agent.runner._console import Console
from acp_agent.runner._local import (
    Terminals,
    exit_status,
    keep_tail,
    read_text_file,
    select_lines,
    write_text_file,
)

TIMEOUT = 30


def run_cli(
    *args: str, cwd: Path, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_agent", "run", *args],
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def start_cli(
    *args: str, cwd: Path, stdin: int | None = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "acp_agent", "run", *args],
        cwd=cwd,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def read_until(stream: IO[bytes], marker: bytes, seen: bytearray) -> None:
    """Read `stream` into `seen` until `marker` shows up (or fail after TIMEOUT)."""
    deadline = time.monotonic() + TIMEOUT
    while marker not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{marker!r} never appeared in {bytes(seen)!r}"
        ready, _, _ = select.select([stream], [], [], remaining)
        if ready:
            chunk = os.read(stream.fileno(), 4096)
            assert chunk, f"output ended before {marker!r}: {bytes(seen)!r}"
            seen += chunk


def read_tool_call(path: Path) -> str:
    return f'@tool read_file {{"path": "{path}"}}'


# --- end to end ----------------------------------------------------------------------------


def test_without_an_api_key_the_echo_reply_is_printed_and_the_run_exits_0(
    tmp_path: Path,
) -> None:
    result = run_cli("hello", "there", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: hello there\n"
    assert "using built-in echo provider" in result.stderr
    assert "OPENAI_API_KEY" in result.stderr


def test_a_bad_config_file_exits_2_naming_the_file_and_the_key_path(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('bogus = 1\n[providers.main]\ntype = "echo"\nchunk_delay = -1\n')

    result = run_cli("--config", str(config), "hi", cwd=tmp_path)

    assert result.returncode == 2
    assert str(config) in result.stderr
    assert "bogus: unknown key" in result.stderr
    assert "providers.main.chunk_delay" in result.stderr
    assert "using" not in result.stderr
    assert result.stdout == ""


def test_a_bad_config_file_never_starts_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text("providers = 3\n")

    async def must_not_start(*args: object) -> int:
        raise AssertionError("the agent was started despite a bad config")

    monkeypatch.setattr(_headless, "_run", must_not_start)
    args = argparse.Namespace(
        prompt=["hi"],
        run_config=None,
        config=str(config),
        cwd=str(tmp_path),
        yes=False,
        debug=False,
    )

    assert run_headless(args) == 2
    assert "providers" in capsys.readouterr().err


def test_a_scripted_read_file_call_prints_the_tool_line_and_the_file_content(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")

    result = run_cli('@tool read_file {"path": "notes.txt"}', cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "→ Read notes.txt (read)" in result.stderr  # relative to the project: shorter
    assert "✓ Read notes.txt (lines 1-2)" in result.stderr
    assert "Tool read_file returned:" in result.stdout
    assert "alpha" in result.stdout
    assert "beta" in result.stdout


def test_cwd_option_sets_the_session_directory_and_must_exist(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("from the project\n")

    result = run_cli("--cwd", "project", '@tool read_file {"path": "notes.txt"}', cwd=tmp_path)
    missing = run_cli("--cwd", "nowhere", "hi", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "from the project" in result.stdout
    assert missing.returncode == 2
    assert f"--cwd: not a directory: {tmp_path / 'nowhere'}" in missing.stderr


def test_reading_outside_the_cwd_without_a_tty_or_yes_is_rejected(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    secret.write_text("the secret\n")

    result = run_cli(read_tool_call(secret), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "Tool read_file failed" in result.stdout
    assert "the secret" not in result.stdout
    assert "no TTY; pass --yes to approve" in result.stderr
    assert f"✗ Read {secret}" in result.stderr


def test_reading_outside_the_cwd_with_yes_is_approved(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    secret.write_text("the secret\n")

    result = run_cli("--yes", read_tool_call(secret), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "Tool read_file returned:" in result.stdout
    assert "the secret" in result.stdout
    assert "permission approved" in result.stderr


def test_on_a_tty_the_permission_question_is_asked_and_the_typed_answer_used(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    secret.write_text("the secret\n")
    controller, terminal = pty.openpty()
    try:
        run = start_cli(read_tool_call(secret), cwd=tmp_path, stdin=terminal)
        assert run.stderr is not None
        read_until(run.stderr, b"choose 1-4", bytearray())
        os.write(controller, b"1\n")
        out, err = run.communicate(timeout=TIMEOUT)
    finally:
        os.close(controller)
        os.close(terminal)

    assert run.returncode == 0, err
    assert b"the secret" in out


def test_ctrl_c_at_a_permission_question_cancels_the_turn(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    secret.write_text("the secret\n")
    controller, terminal = pty.openpty()
    try:
        run = start_cli(read_tool_call(secret), cwd=tmp_path, stdin=terminal)
        assert run.stderr is not None
        read_until(run.stderr, b"choose 1-4", bytearray())
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=TIMEOUT)
    finally:
        os.close(controller)
        os.close(terminal)

    assert run.returncode == 130, err
    assert b"cancelled" in err
    assert b"the secret" not in out


def test_an_error_from_the_agent_exits_1_with_its_message_and_keeps_the_agent_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a local port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "agent.toml"
    config.write_text(
        '[providers.local]\ntype = "openai-compatible"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\napi_key = "x"\nmodels = [{{id = "m"}}]\n'
    )
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))

    result = run_cli("--config", str(config), "hi", cwd=tmp_path)

    assert result.returncode == 1
    assert f"using local/m from {config}" in result.stderr
    assert "acp-agent: error: " in result.stderr
    (log,) = (state / "acp-agent" / "logs").glob("run-*.log")  # where run logs are kept
    assert f"the agent's log is in {log}" in result.stderr
    assert log.read_text()  # the agent's own account of the failure


def test_a_max_tokens_stop_exits_3_and_says_why(tmp_path: Path) -> None:
    result = run_cli("hi\n@stop max_tokens", cwd=tmp_path)

    assert result.returncode == 3
    assert "Echo: hi" in result.stdout
    assert "max_tokens" in result.stderr


def test_ctrl_c_during_a_slow_reply_cancels_it_and_exits_130_promptly(tmp_path: Path) -> None:
    words = " ".join(f"word{n}" for n in range(40))
    run = start_cli(f"@slow 0.3\n{words}", cwd=tmp_path)
    assert run.stdout is not None
    seen = bytearray()
    read_until(run.stdout, b"word0", seen)

    run.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    out, err = run.communicate(timeout=TIMEOUT)

    assert time.monotonic() - interrupted < 2
    assert run.returncode == 130
    assert b"cancelled" in err
    assert b"word39" not in seen + out


# --- permissions ---------------------------------------------------------------------------

PERMISSION_REQUEST = {
    "sessionId": "s",
    "toolCall": {"toolCallId": "c1", "title": "Write /x"},
    "options": [
        {"optionId": "yes-always", "name": "Always", "kind": "allow_always"},
        {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    ],
}


@pytest.mark.anyio
async def test_yes_selects_the_allow_once_option_and_no_tty_a_reject_option() -> None:
    shown, _, err = console()

    approved = await Permissions(shown, "approve").answer(PERMISSION_REQUEST)
    rejected = await Permissions(shown, "reject").answer(PERMISSION_REQUEST)

    assert approved == {"outcome": {"outcome": "selected", "optionId": "yes"}}
    assert rejected == {"outcome": {"outcome": "selected", "optionId": "no"}}
    assert "permission rejected: Write /x (no TTY; pass --yes to approve)" in err.getvalue()


@pytest.mark.anyio
async def test_after_a_cancel_permission_requests_answer_cancelled() -> None:
    permissions = Permissions(console()[0], "approve")

    permissions.cancel_all()

    assert await permissions.answer(PERMISSION_REQUEST) == {"outcome": {"outcome": "cancelled"}}


# --- local files ---------------------------------------------------------------------------


def test_select_lines_counts_from_1_and_keeps_line_endings() -> None:
    text = "one\r\ntwo\nthree\nfour"

    assert select_lines(text, None, None) == text
    assert select_lines(text, 2, 2) == "two\nthree\n"
    assert select_lines(text, 0, 1) == "one\r\n"
    assert select_lines(text, 4, 10) == "four"
    assert select_lines(text, 9, None) == ""
    assert select_lines(text, 1, 0) == ""


@pytest.mark.anyio
async def test_read_text_file_honours_line_and_limit(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a\nb\nc\nd\n")

    result = await read_text_file({"sessionId": "s", "path": str(path), "line": 2, "limit": 2})

    assert result == {"content": "b\nc\n"}


@pytest.mark.anyio
async def test_read_text_file_refuses_relative_paths_and_reports_missing_files(
    tmp_path: Path,
) -> None:
    with pytest.raises(RpcError) as relative:
        await read_text_file({"path": "f.txt"})
    with pytest.raises(RpcError) as missing:
        await read_text_file({"path": str(tmp_path / "nope.txt")})

    assert relative.value.code == INVALID_PARAMS
    assert missing.value.code == RESOURCE_NOT_FOUND


@pytest.mark.anyio
async def test_write_text_file_creates_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "f.txt"

    assert await write_text_file({"path": str(path), "content": "héllo\n"}) == {}
    assert path.read_text(encoding="utf-8") == "héllo\n"


# --- local terminals -----------------------------------------------------------------------


def test_keep_tail_cuts_from_the_start_on_a_character_boundary() -> None:
    assert keep_tail(b"abcdef", 10) == b"abcdef"
    assert keep_tail(b"abcdef", 3) == b"def"
    # "é" is two bytes: keeping 3 of "éé" would start mid-character, so only one fits.
    assert keep_tail("éé".encode(), 3) == "é".encode()
    assert keep_tail("a€".encode(), 2) == b""


def test_exit_status_names_the_signal_of_a_killed_command() -> None:
    assert exit_status(0) == {"exitCode": 0, "signal": None}
    assert exit_status(2) == {"exitCode": 2, "signal": None}
    assert exit_status(-signal.SIGTERM) == {"exitCode": None, "signal": "SIGTERM"}


@pytest.mark.anyio
async def test_a_terminal_keeps_the_end_of_its_output_within_the_byte_limit(
    tmp_path: Path,
) -> None:
    async with anyio.create_task_group() as tg:
        terminals = Terminals(tg, tmp_path)
        created = await terminals.create(
            {
                "command": "printf",
                "args": ["%s", "0123456789é"],
                "outputByteLimit": 4,
            }
        )
        status = await terminals.wait_for_exit(created)
        output = terminals.output(created)
        await terminals.release(created)

    assert status == {"exitCode": 0, "signal": None}
    assert output == {"output": "89é", "truncated": True, "exitStatus": status}


@pytest.mark.anyio
async def test_a_terminal_runs_in_cwd_with_env_and_a_shell_for_a_bare_command_line(
    tmp_path: Path,
) -> None:
    async with anyio.create_task_group() as tg:
        terminals = Terminals(tg, tmp_path)
        created = await terminals.create(
            {"command": "echo $GREETING; pwd", "env": [{"name": "GREETING", "value": "hi"}]}
        )
        await terminals.wait_for_exit(created)
        output = terminals.output(created)
        await terminals.close()

    assert output["output"] == f"hi\n{tmp_path}\n"
    assert output["truncated"] is False


@pytest.mark.anyio
async def test_killing_a_terminal_ends_its_command_and_reports_the_signal(
    tmp_path: Path,
) -> None:
    async with anyio.create_task_group() as tg:
        terminals = Terminals(tg, tmp_path)
        created = await terminals.create({"command": "sleep", "args": ["30"]})
        with anyio.fail_after(5):
            await terminals.kill(created)
            status = await terminals.wait_for_exit(created)
        await terminals.release(created)
        with pytest.raises(RpcError):
            terminals.output(created)

    assert status == {"exitCode": None, "signal": "SIGTERM"}


# --- printing ------------------------------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def console(*, tty: bool = False) -> tuple[Console, io.StringIO, io.StringIO]:
    out, err = (FakeTerminal(), FakeTerminal()) if tty else (io.StringIO(), io.StringIO())
    return Console(out, err), out, err


def test_a_tool_call_prints_one_line_when_it_runs_and_one_when_it_ends() -> None:
    shown, _, err = console()

    shown.show_update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "1",
            "title": "read_file",
            "kind": "read",
            "status": "pending",
        }
    )
    shown.show_update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "1", "title": "Read /a.txt"}
    )
    shown.show_update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "1", "status": "in_progress"}
    )
    shown.show_update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "1",
            "status": "completed",
            "title": "Read /a.txt (lines 1-3)",
        }
    )

    assert err.getvalue() == "→ Read /a.txt (read)\n✓ Read /a.txt (lines 1-3)\n"


def test_a_failed_tool_call_shows_the_reason_from_its_content() -> None:
    shown, _, err = console()
    reason = {"type": "content", "content": {"type": "text", "text": "no such file"}}

    shown.show_update(
        {"sessionUpdate": "tool_call", "toolCallId": "1", "title": "Read /x", "kind": "read"}
    )
    shown.show_update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "1",
            "status": "failed",
            "content": [reason],
        }
    )

    assert err.getvalue() == "→ Read /x (read)\n✗ Read /x: no such file\n"


def test_a_plan_prints_as_a_checklist() -> None:
    shown, _, err = console()

    shown.show_update(
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "look", "status": "completed", "priority": "high"},
                {"content": "edit", "status": "in_progress", "priority": "high"},
                {"content": "test", "status": "pending", "priority": "low"},
            ],
        }
    )

    assert err.getvalue() == "Plan:\n  [x] look\n  [~] edit\n  [ ] test\n"


def test_reply_goes_to_stdout_and_piped_thoughts_to_stderr_marked_per_line() -> None:
    shown, out, err = console()

    shown.show_update(
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm\nso"}}
    )
    shown.show_update(
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": " then"}}
    )
    shown.show_update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Answer"}}
    )
    shown.show_update({"sessionUpdate": "usage_update", "used": 1, "size": 2})
    shown.finish()

    assert out.getvalue() == "Answer\n"
    assert err.getvalue() == "thinking: hmm\nthinking: so then\n"


def test_on_a_shared_terminal_a_tool_line_first_ends_the_open_reply_line() -> None:
    shown, out, err = console(tty=True)

    shown.reply("Let me look")
    shown.notice("→ Read /a.txt (read)")
    shown.reply("Done.")
    shown.finish()

    assert out.getvalue() == "Let me look\nDone.\n"
    assert err.getvalue() == "→ Read /a.txt (read)\n"
