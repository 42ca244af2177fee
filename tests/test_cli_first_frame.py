"""The first frame is read before the event loop exists, and an `initialize` in it is
answered there (`dialect.answer_first_initialize`): whatever else arrives first, or in
the same write, is still read and answered as the server always does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from schema_support import assert_frames_from_agent

TIMEOUT = 30
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


def frame(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def replies(stdin: bytes, cwd: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "acp_agent"],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return checked_replies(done.stdout, stdin)


def checked_replies(stdout: bytes, stdin: bytes) -> list[dict[str, Any]]:
    """The agent's frames in `stdout`, each checked against the v1 schema (`stdin`, what
    the client wrote, says which method each answer answers)."""
    got = [json.loads(line) for line in stdout.splitlines()]
    assert_frames_from_agent("v1", got, client_frames(stdin))
    return got


def client_frames(stdin: bytes) -> list[dict[str, Any]]:
    frames = []
    for line in stdin.splitlines():
        try:
            frames.append(json.loads(line))
        except ValueError:
            continue  # the unreadable lines some tests send on purpose answer no method
    return frames


def new_session(request_id: int, cwd: Path) -> dict[str, Any]:
    params = {"cwd": str(cwd), "mcpServers": []}
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/new", "params": params}


def test_an_initialize_and_a_session_in_one_write_are_both_answered(tmp_path: Path) -> None:
    got = replies(frame(INITIALIZE) + frame(new_session(1, tmp_path)), tmp_path)

    answers = [r for r in got if "id" in r]
    assert [r["id"] for r in answers] == [0, 1]
    assert answers[0]["result"]["protocolVersion"] == 1
    assert answers[0]["result"]["agentInfo"]["name"] == "acp-agent"
    assert answers[1]["result"]["sessionId"]


def test_an_unreadable_first_line_gets_its_parse_error_and_initialize_still_works(
    tmp_path: Path,
) -> None:
    got = replies(b"{not json\n" + frame(INITIALIZE), tmp_path)

    assert got[0]["error"]["code"] == -32700
    assert got[0]["id"] is None
    assert got[1]["id"] == 0 and got[1]["result"]["protocolVersion"] == 1


def test_a_request_before_initialize_is_answered_by_the_server(tmp_path: Path) -> None:
    bad_initialize = {**INITIALIZE, "id": 5, "params": {"protocolVersion": "one"}}
    got = replies(frame(bad_initialize) + frame(INITIALIZE), tmp_path)

    assert got[0]["id"] == 5
    assert got[0]["error"]["code"] == -32602
    assert "protocolVersion" in got[0]["error"]["message"]
    assert got[1]["id"] == 0 and "result" in got[1]


def test_a_first_frame_written_in_pieces_is_answered(tmp_path: Path) -> None:
    agent = subprocess.Popen(
        [sys.executable, "-m", "acp_agent"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert agent.stdin is not None and agent.stdout is not None
    whole = frame(INITIALIZE)
    for piece in (whole[:7], whole[7:30], whole[30:]):
        agent.stdin.write(piece)
        agent.stdin.flush()
    first_line = agent.stdout.readline()  # answered before the input ends
    agent.stdin.close()
    assert agent.wait(TIMEOUT) == 0
    (answer,) = checked_replies(first_line + agent.stdout.read(), whole)
    assert answer["id"] == 0 and answer["result"]["protocolVersion"] == 1


def test_input_that_ends_at_once_ends_the_agent(tmp_path: Path) -> None:
    assert replies(b"", tmp_path) == []
    unterminated = frame({**INITIALIZE, "id": 3}).rstrip(b"\n")  # the last line counts
    (answer,) = replies(unterminated, tmp_path)
    assert answer["id"] == 3 and answer["result"]["protocolVersion"] == 1
