"""A reader that goes away (`acp-agent ... | head -n 2`) ends the command quietly: no
traceback, the status a shell gives a writer killed by SIGPIPE (141), as Unix tools do.

Each command runs as a real subprocess writing into a real pipe, which the test closes
after one line (or before the command starts, so its first write finds it closed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 60
CLOSED_PIPE = 141
BIG_PROMPT = "lorem ipsum " * 20_000
"""Its echo is larger than a pipe's buffer: the reply cannot all be written before the
reader leaves, so the run meets the closed pipe whatever the timing."""


def _read_one_line_then_close(
    args: list[str], cwd: Path, stdin_text: str | None = None
) -> tuple[int, bytes, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "acp_agent", *args],
        cwd=cwd,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    if stdin_text is not None:
        assert process.stdin is not None
        process.stdin.write(stdin_text.encode())
        process.stdin.close()
    first = process.stdout.readline()
    process.stdout.close()  # what `head -n 1` does once it has its line
    errors = process.stderr.read().decode()
    return process.wait(timeout=TIMEOUT), first, errors


def _into_a_closed_pipe(args: list[str], cwd: Path) -> tuple[int, str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        result = subprocess.run(
            [sys.executable, "-m", "acp_agent", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=TIMEOUT,
        )
    finally:
        os.close(write_end)
    return result.returncode, result.stderr


def _quiet(errors: str) -> None:
    assert "Traceback" not in errors
    assert "BrokenPipeError" not in errors
    assert "Broken pipe" not in errors


def test_a_stream_json_run_whose_reader_left_ends_quietly_with_141(tmp_path: Path) -> None:
    code, first, errors = _read_one_line_then_close(
        ["run", "-o", "stream-json", "-"], tmp_path, stdin_text=BIG_PROMPT
    )
    assert first.startswith(b'{"type":"session"')
    _quiet(errors)
    assert code == CLOSED_PIPE


def test_a_text_run_whose_reader_left_ends_quietly_with_141(tmp_path: Path) -> None:
    code, _, errors = _read_one_line_then_close(["run", "-"], tmp_path, stdin_text=BIG_PROMPT)
    _quiet(errors)
    assert code == CLOSED_PIPE


@pytest.mark.parametrize("command", [["doctor", "--offline"], ["models"], ["--help"]])
def test_a_command_whose_reader_left_after_one_line_prints_no_traceback(
    tmp_path: Path, command: list[str]
) -> None:
    code, first, errors = _read_one_line_then_close(command, tmp_path)
    assert first
    _quiet(errors)
    # All of it may have fit in the pipe before the reader left: then it simply succeeded.
    assert code in (0, CLOSED_PIPE)


@pytest.mark.parametrize(
    "command", [["doctor", "--offline"], ["models"], ["models", "--json"], ["run", "hi"]]
)
def test_a_command_writing_into_a_closed_pipe_exits_141_without_a_traceback(
    tmp_path: Path, command: list[str]
) -> None:
    code, errors = _into_a_closed_pipe(command, tmp_path)
    _quiet(errors)
    assert code == CLOSED_PIPE
