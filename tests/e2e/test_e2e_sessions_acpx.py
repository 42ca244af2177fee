"""`acpx` named sessions across agent restarts: `sessions new --name N`, then `prompt -s N`,
each prompt in a new agent process (`--ttl 1`: acpx's helper lets the agent go after a
second idle, and the test waits until it is gone). acpx reconnects with `session/resume`,
which we advertise; the fake OpenAI server shows what history the model got.

Run `npm install` at the repository root first; without `node_modules/.bin/acpx` these
tests are skipped. acpx keeps its own state under `$HOME/.acpx` (a temporary HOME here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acpx_support import needs_acpx, run_acpx
from e2e_support import HELLO_TEXT, needs_proc
from fake_llm import FakeLLM, fake_reply, message_text
from test_e2e_acpx import agent_text, answer_to, frames, wait_until_gone

pytestmark = [pytest.mark.e2e, needs_proc, needs_acpx]


@pytest.fixture
def env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The agent's env (and acpx's: its HOME is temporary) with a state dir of the test's."""
    return {**agent_env, "XDG_STATE_HOME": str(tmp_path / "state")}


def prompt_in_new_agent(
    fake: FakeLLM, env: dict[str, str], cwd: Path, name: str, text: str
) -> list[dict[str, Any]]:
    """`acpx prompt -s NAME TEXT` once no agent of this test is left running, so the prompt
    starts a new one; the exchange acpx printed."""
    assert wait_until_gone(fake) == [], "the previous agent is still running"
    return frames(run_acpx(env, cwd, "prompt", "-s", name, text))


def methods(messages: list[dict[str, Any]]) -> list[str]:
    return [m["method"] for m in messages if "method" in m and "id" in m]


def test_a_named_session_goes_on_across_agent_restarts_with_its_whole_history(
    fake_llm: FakeLLM, env: dict[str, str], workspace: Path
) -> None:
    created = run_acpx(env, workspace, "sessions", "new", "--name", "work")
    assert created.returncode == 0, created.stderr
    [ensured] = [json.loads(line) for line in created.stdout.splitlines() if line.strip()]
    session_id = ensured["acpxSessionId"]

    read = '[[tool read_file {"path": "hello.txt"}]]'
    first = prompt_in_new_agent(fake_llm, env, workspace, "work", read)
    first_request = fake_llm.requests[-1]["messages"]
    second = prompt_in_new_agent(fake_llm, env, workspace, "work", "what did it say?")

    for exchange in (first, second):
        assert methods(exchange)[:2] == ["initialize", "session/resume"]
        assert "session/new" not in methods(exchange)
        resume = next(m for m in exchange if m.get("method") == "session/resume")
        assert resume["params"]["sessionId"] == session_id
        assert "result" in answer_to(exchange, "session/resume")
        assert answer_to(exchange, "session/prompt")["result"]["stopReason"] == "end_turn"
        assert not [m for m in exchange if "error" in m]
    assert agent_text(second) == fake_reply("what did it say?")

    model_saw = fake_llm.requests[-1]["messages"]
    assert model_saw[1 : len(first_request)] == first_request[1:]
    assert [m["role"] for m in model_saw] == [
        "system", "user", "assistant", "tool", "assistant", "user"
    ]  # fmt: skip
    assert all(line in message_text(model_saw[3]) for line in HELLO_TEXT.splitlines())
    assert message_text(model_saw[-1]) == "what did it say?"


def test_acpx_lists_the_stored_sessions_with_their_titles_and_filters_by_cwd(
    fake_llm: FakeLLM, env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run_acpx(env, workspace, "sessions", "new", "--name", "titled").returncode == 0
    prompt_in_new_agent(fake_llm, env, workspace, "titled", "Explain the build setup")
    assert wait_until_gone(fake_llm) == []

    listed = run_acpx(env, workspace, "sessions", "list", "--filter-cwd", str(workspace))
    unmatched = run_acpx(env, workspace, "sessions", "list", "--filter-cwd", str(elsewhere))

    [found] = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    assert found["source"] == "agent"
    [session] = found["sessions"]
    assert session["cwd"] == str(workspace)
    assert session["title"] == "Explain the build setup"
    assert session["updatedAt"]
    [empty] = [json.loads(line) for line in unmatched.stdout.splitlines() if line.strip()]
    assert empty["sessions"] == []
