"""Errors, retry waits and slash commands as real clients see them: the SDK client and
`acpx` drive `python -m acp_agent` against the fake LLM.

A failed prompt's reason must reach clients that show only `error.data.details` (acpx,
Toad); retry waits reach clients without `session.notices` as thought lines of their own;
a slash command's usage error is a reply, not a failed prompt.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acpx_support import needs_acpx, run_acpx
from fake_llm import FakeLLM
from test_e2e_sdk_client import prompt, running_agent

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def quick_retries(fake_llm: FakeLLM, agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The agent's environment with a config whose retries take milliseconds."""
    config = tmp_path / "quick-retries.toml"
    config.write_text(
        f"""
[providers.fake]
type = "openai-compatible"
base_url = "{fake_llm.base_url}"
retry = {{ max_attempts = 3, initial_delay = 0.01, max_delay = 0.02 }}
models = [{{ id = "fake-model" }}]
""",
        encoding="utf-8",
    )
    return {**agent_env, "ACP_AGENT_CONFIG": str(config)}


def json_lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def updates(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    ]


# --- the SDK client ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sdk_client_a_persistent_server_error_fails_the_prompt_with_details(
    quick_retries: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(quick_retries, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        with pytest.raises(RequestError) as failure:
            await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=prompt("[[status 500]] hi")), 30
            )
        thoughts = "".join(
            update.content.text
            for update in client.of(sid)
            if getattr(update, "session_update", None) == "agent_thought_chunk"
        )

    error = failure.value
    assert error.code == -32603
    assert error.data == {"details": str(error)}  # str(): the error's message
    assert (
        "HTTP 500" in error.data["details"] and "gave up after 3 attempts" in error.data["details"]
    )
    # The two waits before giving up: each a paragraph of its own.
    first, second, rest = thoughts.split("\n\n")
    assert re.fullmatch(r"\[fake: .*HTTP 500.*; retrying in .*\(attempt 2 of 3\)\]", first)
    assert re.fullmatch(r"\[fake: .*HTTP 500.*; retrying in .*\(attempt 3 of 3\)\]", second)
    assert rest == ""


@pytest.mark.anyio
async def test_sdk_client_an_unknown_model_is_answered_as_a_reply_and_the_turn_ends(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        result = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=prompt("/model nope")), 10
        )
        text = client.text(sid)

    assert result.stop_reason == "end_turn"
    assert text.startswith("There is no model 'nope'.")
    assert fake_llm.requests == []  # not a model call


# --- acpx ------------------------------------------------------------------------------------


@needs_acpx
def test_acpx_prints_the_details_of_a_failed_prompt(
    quick_retries: dict[str, str], workspace: Path
) -> None:
    quiet = run_acpx(quick_retries, workspace, "exec", "[[status 500]] hi", output="quiet")
    exchange = run_acpx(quick_retries, workspace, "exec", "[[status 500]] hi", output="json")

    assert quiet.returncode != 0
    assert "gave up after 3 attempts" in quiet.stderr, quiet.stderr
    [answer] = [m for m in json_lines(exchange) if "error" in m and m.get("id") is not None]
    error = answer["error"]
    assert error["code"] == -32603
    assert error["data"] == {"details": error["message"]}
    thoughts = updates(json_lines(exchange), "agent_thought_chunk")
    assert len(thoughts) == 2
    assert all(t["content"]["text"].endswith(")]\n\n") for t in thoughts)


@needs_acpx
def test_acpx_mode_command_switches_and_sends_current_mode_update(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    messages = json_lines(run_acpx(agent_env, workspace, "exec", "/mode read-only", output="json"))

    [mode] = updates(messages, "current_mode_update")
    assert mode["currentModeId"] == "read-only"
    [options] = updates(messages, "config_option_update")
    assert next(o for o in options["configOptions"] if o["id"] == "mode")["currentValue"] == (
        "read-only"
    )
    text = "".join(u["content"]["text"] for u in updates(messages, "agent_message_chunk"))
    assert text == "Mode set to Read only (read-only)."
    [answer] = [m for m in messages if "stopReason" in m.get("result", {})]
    assert answer["result"]["stopReason"] == "end_turn"
    assert fake_llm.requests == []  # not a model call
