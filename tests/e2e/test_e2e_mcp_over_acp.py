"""MCP servers that live in the editor (`mcpServers` entries of type `acp`), end to end: the
npm `@agentclientprotocol/sdk` client (`mcp_over_acp_client.mjs`, its `McpOverAcpProvider`)
drives `python -m acp_agent` and answers the agent's `mcp/message` requests by relaying
them to a real MCP server subprocess (tests/mcp_servers/everything.py); the fake OpenAI
server scripts the model's tool calls.

The Python `acp` package's client is not used here: it knows the older `mcp/connect`
draft of the binding and routes no `mcp/message` to a client.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from e2e_support import AGENT_COMMAND, REPO_ROOT
from fake_llm import FakeLLM
from mcp_e2e import (
    SERVERS,
    VENDOR_KEY,
    VENDOR_KEY_ENV,
    calls,
    tool_names,
    tool_results,
    write_config,
)
from schema_support import assert_frames_from_agent, negotiated_dialect

CLIENT = Path(__file__).with_name("mcp_over_acp_client.mjs")
SDK = REPO_ROOT / "node_modules" / "@agentclientprotocol" / "sdk"
HANG_GUARD = 90.0
"""Seconds before the whole exchange is called a hang (two Python processes start)."""
CONNECT_SECONDS = 60.0
"""The editor's server starts a Python process that imports the MCP SDK: seconds on a
loaded machine, past the default `mcp_connect_timeout` of 5 s."""

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not SDK.exists() or shutil.which("node") is None,
        reason="the npm ACP SDK is not installed: run `npm install` (needs node)",
    ),
]


EditorRun = Callable[..., dict[str, Any]]
"""`editor(prompts, **options)`: run the editor client through `prompts`; what it saw."""


@pytest.fixture
def editor(
    fake_llm: FakeLLM,
    agent_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
    tmp_path: Path,
) -> EditorRun:
    return partial(editor_session, fake_llm, agent_env, agent_stderr, workspace, tmp_path)


def editor_session(
    fake: FakeLLM,
    agent_env: dict[str, str],
    stderr: Path,
    workspace: Path,
    tmp_path: Path,
    prompts: list[str],
    **options: Any,
) -> dict[str, Any]:
    """Run the editor client through `prompts`; what it saw (see the script's header)."""
    config = write_config(tmp_path / "agent.toml", fake.base_url, connect_timeout=CONNECT_SECONDS)
    spec = {
        "agent": [*AGENT_COMMAND, "--config", str(config)],
        "cwd": str(workspace),
        "env": {**agent_env, VENDOR_KEY_ENV: VENDOR_KEY},
        "stderr": str(stderr),
        "server": [sys.executable, str(SERVERS / "everything.py"), "tools"],
        "prompts": prompts,
        **options,
    }
    done = subprocess.run(
        ["node", str(CLIENT)],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    check_frames(report["frames"])
    return report


def check_frames(frames: list[dict[str, Any]]) -> None:
    """Every frame the agent sent the editor is what the schema of the dialect they
    agreed on (v1: the editor asks for it) defines (`assert_frames_from_agent`)."""
    received = [frame["in"] for frame in frames if "in" in frame]
    sent = [frame["out"] for frame in frames if "out" in frame]
    assert negotiated_dialect(received, sent) == "v1", "the editor initializes ACP v1"
    assert_frames_from_agent("v1", received, sent)


def updates(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [u["update"] for u in report["updates"] if u["update"]["sessionUpdate"] == kind]


def tool_call(report: dict[str, Any], title: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tool call titled `title` as announced, and its last update."""
    [start] = [u for u in updates(report, "tool_call") if u["title"] == title]
    [*_, last] = [
        u for u in updates(report, "tool_call_update") if u["toolCallId"] == start["toolCallId"]
    ]
    return start, last


def shown_text(update: dict[str, Any]) -> str:
    return "".join(item["content"]["text"] for item in update.get("content") or [])


def reply(report: dict[str, Any]) -> str:
    return "".join(u["content"]["text"] for u in updates(report, "agent_message_chunk"))


def test_a_server_in_the_editor_gives_the_model_its_tools_through_mcp_message(
    fake_llm: FakeLLM, editor: EditorRun
) -> None:
    text = calls(
        ("mcp__tools__echo", {"text": "through the editor"}),
        ("mcp__tools__add", {"a": 2, "b": 3}),
    )
    report = editor([text])

    assert report["agentCapabilities"]["mcpCapabilities"]["acp"] is True
    assert report["stops"] == ["end_turn"]
    first, follow_up = fake_llm.requests
    assert {"mcp__tools__echo", "mcp__tools__add"} <= tool_names(first)
    results = tool_results(follow_up)
    assert results["mcp__tools__echo"] == "through the editor"
    assert json.loads(results["mcp__tools__add"]) == {"sum": 5}
    # The server speaks the binding's MCP revision: discovery, not the old handshake.
    asked = report["asked"]
    assert asked[0] == "server/discover" and "initialize" not in asked
    assert {"tools/list", "tools/call echo", "tools/call add"} <= set(asked)
    start, last = tool_call(report, "tools: echo")
    assert start["rawInput"] == {"text": "through the editor"}
    assert last["status"] == "completed"
    assert shown_text(last) == "through the editor"
    # The editor's server brings no trust of its own (its read-only hints are not
    # believed): the user is asked, as for any other server's tools.
    assert report["permissions"] == ["tools: echo", "tools: add"]
    assert tool_call(report, "tools: add")[1]["status"] == "completed"


def test_the_editors_refusals_are_shown_as_mcp_failures(
    fake_llm: FakeLLM, editor: EditorRun
) -> None:
    """An inner MCP error fails the call; an outer one (no such server) fails the server."""
    text = calls(("mcp__tools__echo", {"text": "refused"}), ("mcp__tools__add", {"a": 1, "b": 1}))
    report = editor(
        [text, "/mcp"],
        refuse=["echo"],
        ghost="ghost",
        mode="bypass",
    )

    assert report["stops"] == ["end_turn", "end_turn"]
    refusal = "MCP server 'tools': the editor refused echo: not on this machine"
    _, echo = tool_call(report, "tools: echo")
    assert echo["status"] == "failed"
    assert refusal in shown_text(echo)
    results = tool_results(fake_llm.requests[-1])
    assert refusal in results["mcp__tools__echo"]
    assert json.loads(results["mcp__tools__add"]) == {"sum": 2}  # the server goes on serving
    shown = reply(report)
    ghost = (
        "MCP server 'ghost' (in the editor, id ghost-id): the editor could not answer: "
        "MCP server registration unavailable (-33001)"
    )
    assert shown.count(ghost) >= 2, shown  # reported when it failed, and by /mcp
    assert "MCP server 'tools' (in the editor, id " in shown and "ready" in shown
    assert not any(name.startswith("mcp__ghost__") for name in tool_names(fake_llm.requests[0]))


def test_progress_from_the_editor_shows_and_a_cancel_reaches_its_server(
    fake_llm: FakeLLM, editor: EditorRun
) -> None:
    """The server's progress comes back as `mcp/message` notifications of the call's
    request; cancelling the prompt cancels that request, and the editor the server's call."""
    report = editor(
        [calls(("mcp__tools__slow", {})), calls(("mcp__tools__was_cancelled", {}))],
        mode="bypass",
        cancelOnProgress=True,
    )

    assert report["stops"] == ["cancelled", "end_turn"]
    assert "warming up (1/10)" in report["cancelledAfter"]
    _, slow = tool_call(report, "tools: slow")
    assert slow["status"] == "failed"
    assert tool_results(fake_llm.requests[-1]) == {"mcp__tools__was_cancelled": "cancelled"}


def test_a_tool_the_editors_server_adds_reaches_the_models_next_request(
    fake_llm: FakeLLM, editor: EditorRun
) -> None:
    """The server in the editor adds a tool and says so on the `subscriptions/listen`
    stream the agent opened through the editor: the next turn offers it to the model."""
    report = editor(
        [calls(("mcp__tools__grow", {})), calls(("mcp__tools__grown", {}))],
        mode="bypass",
    )

    assert report["stops"] == ["end_turn", "end_turn"]
    first, grew, second, answered = fake_llm.requests
    assert "mcp__tools__grown" not in tool_names(first)
    assert tool_results(grew) == {"mcp__tools__grow": "grew"}
    assert "mcp__tools__grown" in tool_names(second)
    assert tool_results(answered) == {"mcp__tools__grown": "grown"}
    asked = report["asked"]
    assert asked.count("subscriptions/listen") == 1  # one stream, for the whole session
    assert asked.count("tools/list") == 2  # read again once, after the change
