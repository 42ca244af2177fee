"""`acpx` (the npm headless ACP client, pinned in package.json) drives `python -m acp_agent`.

Run `npm install` at the repository root first; without `node_modules/.bin/acpx` these
tests are skipped.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from acpx_support import needs_acpx, run_acpx
from e2e_support import HELLO_TEXT, needs_proc, processes_with_env
from fake_llm import FakeLLM, fake_reply

pytestmark = [pytest.mark.e2e, needs_acpx]


def frames(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """The NDJSON exchange acpx printed; every stdout line must be JSON."""
    assert result.returncode == 0, (
        f"acpx exited {result.returncode}\nstdout tail: {result.stdout[-2000:]}\n"
        f"stderr: {result.stderr}"
    )
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def answer_to(messages: list[dict[str, Any]], method: str) -> dict[str, Any]:
    """The response to the first `method` request (ids repeat across directions: go by order)."""
    index, request = next((i, m) for i, m in enumerate(messages) if m.get("method") == method)
    for message in messages[index + 1 :]:
        if (
            message.get("id") == request["id"]
            and "method" not in message
            and (method != "session/prompt" or "stopReason" in message.get("result", {}))
        ):
            return message
    raise AssertionError(f"no answer to {method} in {messages}")


def updates(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == kind
    ]


def agent_text(messages: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates(messages, "agent_message_chunk"))


def wait_until_gone(fake: FakeLLM, timeout: float = 10.0) -> list[int]:
    """The agent processes still alive; polls (another process's end has no event to wait on)
    until none is, or `timeout` seconds, a hang guard, have passed."""
    deadline = time.monotonic() + timeout
    while (left := processes_with_env("OPENAI_BASE_URL", fake.base_url)) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    return left


@needs_proc
def test_acpx_exec_streams_the_reply_and_ends_the_turn(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    messages = frames(run_acpx(agent_env, workspace, "exec", "hello from acpx"))

    initialize = answer_to(messages, "initialize")
    assert initialize["result"]["protocolVersion"] == 1
    assert initialize["result"]["agentInfo"]["name"] == "acp-agent"
    assert len(updates(messages, "agent_message_chunk")) > 1
    assert agent_text(messages) == fake_reply("hello from acpx")
    assert answer_to(messages, "session/prompt")["result"]["stopReason"] == "end_turn"
    assert not [m for m in messages if "error" in m]
    assert fake_llm.requests[0]["messages"][-1]["content"] == "hello from acpx"
    assert wait_until_gone(fake_llm) == [], "the agent outlived acpx exec"


def test_acpx_read_file_tool_call_uses_acpx_fs_and_the_content_reaches_the_model(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    hello = workspace / "hello.txt"
    messages = frames(
        run_acpx(agent_env, workspace, "exec", '[[tool read_file {"path": "hello.txt"}]]')
    )

    [read] = [m for m in messages if m.get("method") == "fs/read_text_file"]
    assert read["params"]["path"] == str(hello)
    [started] = updates(messages, "tool_call")
    assert started["kind"] == "read"
    finished = [
        u for u in updates(messages, "tool_call_update") if u["toolCallId"] == started["toolCallId"]
    ]
    assert finished[-1]["status"] == "completed"
    assert answer_to(messages, "session/prompt")["result"]["stopReason"] == "end_turn"

    _, follow_up = fake_llm.requests
    tool_message = follow_up["messages"][-1]
    assert tool_message["role"] == "tool"
    assert all(line in str(tool_message["content"]) for line in HELLO_TEXT.splitlines())
    assert "Hello from the e2e workspace!" in agent_text(messages)


def test_acpx_quiet_format_prints_the_final_text(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    result = run_acpx(agent_env, workspace, "exec", "quiet please", output="quiet")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == fake_reply("quiet please")


def test_acpx_sees_two_subagents_work_in_the_parents_tool_calls(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    """acpx advertises no `subagents`: each child's work shows in its `agent` tool call,
    and nothing arrives under another session id."""
    calls = "".join(
        f"[[tool agent {json.dumps({'description': name, 'prompt': task})}]]"
        for name, task in (("first", "count one two"), ("second", "count three four"))
    )
    messages = frames(run_acpx(agent_env, workspace, "exec", calls))

    session_ids = {
        m["params"]["sessionId"] for m in messages if m.get("method") == "session/update"
    }
    assert len(session_ids) == 1
    started = updates(messages, "tool_call")
    assert [u["title"] for u in started] == ["Subagent: first", "Subagent: second"]
    finished = [u for u in updates(messages, "tool_call_update") if u.get("status") == "completed"]
    shown = json.dumps(finished)
    assert fake_reply("count one two") in shown and fake_reply("count three four") in shown
    assert answer_to(messages, "session/prompt")["result"]["stopReason"] == "end_turn"
