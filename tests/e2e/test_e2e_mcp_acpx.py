"""MCP servers through `acpx` (the npm headless ACP client, pinned in package.json).

acpx sends `mcpServers: []` unless told otherwise, so the servers come from the agent's
config file (`[mcp_servers.<name>]`): the test server over stdio, over streamable HTTP and
over SSE (served by its own process on 127.0.0.1), one that hangs at startup. acpx's own
`--mcp-config` adds an editor-side server, whose entry wins over the config's of the same
name. The fake LLM scripts the model's tool calls (`[[tool NAME {json}]]`).

Run `npm install` at the repository root first; without `node_modules/.bin/acpx` these
tests are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acpx_support
import pytest
from acpx_support import needs_acpx
from e2e_support import needs_proc, tool
from fake_llm import FakeLLM, message_text
from mcp_e2e import (
    VENDOR_KEY,
    VENDOR_KEY_ENV,
    new_mark,
    stdio_entry,
    stdio_table,
    wait_gone,
    web_server,
    write_config,
)

PERMISSION_DENIED_EXIT = 5  # acpx: every permission request was denied
BUDGET = 3.0

pytestmark = [pytest.mark.e2e, needs_acpx]


@dataclass
class Run:
    """One `acpx exec`: its exit code, the JSON-RPC exchange it printed, the model's view."""

    returncode: int
    messages: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    stderr: str

    def requests_for(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("method") == method]

    def answer(self, method: str) -> dict[str, Any]:
        """The response to the first `method` request (ids repeat across directions: go by
        order; a prompt's answer is the one with a stop reason)."""
        request = self.requests_for(method)[0]
        index = self.messages.index(request)
        for message in self.messages[index + 1 :]:
            if (
                message.get("id") == request["id"]
                and "method" not in message
                and (method != "session/prompt" or "stopReason" in message.get("result", {}))
            ):
                return message
        raise AssertionError(f"no answer to {method}")

    def stop_reason(self) -> str:
        return str(self.answer("session/prompt")["result"]["stopReason"])

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.requests_for("session/update")
            if m["params"]["update"].get("sessionUpdate") == kind
        ]

    def text(self) -> str:
        return "".join(u["content"]["text"] for u in self.updates("agent_message_chunk"))

    def tool_call(self, title: str) -> tuple[dict[str, Any], str | None, str]:
        """The tool call titled `title`: its start, final status and shown text."""
        [start] = [u for u in self.updates("tool_call") if u["title"] == title]
        later = [
            u for u in self.updates("tool_call_update") if u["toolCallId"] == start["toolCallId"]
        ]
        statuses = [u["status"] for u in later if "status" in u]
        shown = "".join(item["content"]["text"] for u in later for item in u.get("content") or [])
        return start, (statuses[-1] if statuses else None), shown

    def tool_results(self) -> dict[str, str]:
        """The tool messages of the model's last request, by the name of the call each
        answers."""
        last = self.requests[-1]["messages"]
        names = {
            call["id"]: call["function"]["name"]
            for message in last
            for call in message.get("tool_calls") or []
        }
        results: dict[str, str] = {}
        for message in reversed(last):
            if message["role"] != "tool":
                break
            results[names[message["tool_call_id"]]] = message_text(message)
        return results


def run_acpx(
    fake: FakeLLM,
    env: dict[str, str],
    cwd: Path,
    config: Path,
    prompt: str,
    *options: str,
) -> Run:
    """`acpx <options> exec PROMPT` against our agent started with `config`, json-strict."""
    before = len(fake.requests)
    done = acpx_support.run_acpx(
        env,
        cwd,
        "exec",
        prompt,
        options=options or ("--approve-all",),
        agent_options=("--config", str(config)),
        timeout=60,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return Run(
        returncode=done.returncode,
        messages=[json.loads(line) for line in lines],  # json-strict: every line is JSON
        requests=fake.requests[before:],
        stderr=done.stderr,
    )


def explain(run: Run) -> str:
    return f"acpx exited {run.returncode}\nstderr: {run.stderr[-3000:]}"


@pytest.fixture
def env(agent_env: dict[str, str]) -> dict[str, str]:
    return {**agent_env, VENDOR_KEY_ENV: VENDOR_KEY}


@pytest.fixture
def mark() -> str:
    return new_mark()


@pytest.fixture
def web_urls() -> Iterator[tuple[str, str]]:
    with web_server("http") as http_url, web_server("sse") as sse_url:
        yield http_url, sse_url


# --- servers from the config file ------------------------------------------------------------


@needs_proc
def test_acpx_gets_the_configs_servers_over_stdio_http_and_sse_and_its_own_entry_wins(
    fake_llm: FakeLLM,
    env: dict[str, str],
    workspace: Path,
    tmp_path: Path,
    mark: str,
    web_urls: tuple[str, str],
) -> None:
    http_url, sse_url = web_urls
    config = write_config(
        tmp_path / "agent.toml",
        fake_llm.base_url,
        {
            "local": stdio_table(mark=mark),
            "web": {"type": "http", "url": http_url, "headers": {"X-Team": "blue"}},
            "feed": {"type": "sse", "url": sse_url, "headers": {"X-Team": "green"}},
            "shared": stdio_table(mark=mark, WHO="config"),
        },
    )
    acpx_servers = tmp_path / "acpx-mcp.json"
    acpx_servers.write_text(
        json.dumps({"mcpServers": [stdio_entry("shared", mark=mark, WHO="acpx")]}),
        encoding="utf-8",
    )

    run = run_acpx(
        fake_llm,
        env,
        workspace,
        config,
        tool("mcp__local__echo", text="over stdio")
        + tool("mcp__web__header", name="X-Team")
        + tool("mcp__feed__header", name="X-Team")
        + tool("mcp__shared__env", name="WHO"),
        "--approve-all",
        "--mcp-config",
        str(acpx_servers),
    )

    assert run.returncode == 0, explain(run)
    capabilities = run.answer("initialize")["result"]["agentCapabilities"]
    assert capabilities["mcpCapabilities"] == {"http": True, "sse": True, "acp": True}
    [new] = run.requests_for("session/new")
    assert [s["name"] for s in new["params"]["mcpServers"]] == ["shared"]
    assert run.stop_reason() == "end_turn"
    for title in ("local: echo", "web: header", "feed: header", "shared: env"):
        start, status, _ = run.tool_call(title)
        assert status == "completed", title
    start, _, shown = run.tool_call("web: header")
    assert start["rawInput"] == {"name": "X-Team"}
    assert shown == "blue"
    assert run.tool_results() == {
        "mcp__local__echo": "over stdio",
        "mcp__web__header": "blue",
        "mcp__feed__header": "green",
        "mcp__shared__env": "acpx",
    }
    assert wait_gone(mark) == [], "an MCP server outlived acpx exec"


@needs_proc
def test_acpx_goes_on_when_a_configured_server_hangs_and_is_told_why(
    fake_llm: FakeLLM, env: dict[str, str], workspace: Path, tmp_path: Path, mark: str
) -> None:
    config = write_config(
        tmp_path / "agent.toml",
        fake_llm.base_url,
        {"stuck": stdio_table("hang.py", mark=mark), "local": stdio_table(mark=mark)},
        connect_timeout=BUDGET,
    )

    run = run_acpx(fake_llm, env, workspace, config, tool("mcp__local__echo", text="works"))

    assert run.returncode == 0, explain(run)
    assert run.stop_reason() == "end_turn"
    text = run.text()
    assert "MCP server 'stuck'" in text
    assert f"did not connect within {BUDGET:g}s" in text
    assert "warming up, this may take a while" in text
    assert run.tool_results() == {"mcp__local__echo": "works"}
    assert "mcp__stuck" not in json.dumps(run.requests[0]["tools"])
    assert wait_gone(mark) == [], "the hung server (or its child) outlived the agent"


def test_acpx_sees_a_crash_mid_call_as_a_failed_tool_call_and_the_turn_ends(
    fake_llm: FakeLLM, env: dict[str, str], workspace: Path, tmp_path: Path, mark: str
) -> None:
    config = write_config(
        tmp_path / "agent.toml", fake_llm.base_url, {"local": stdio_table(mark=mark)}
    )

    run = run_acpx(fake_llm, env, workspace, config, tool("mcp__local__crash"))

    assert run.returncode == 0, explain(run)
    assert run.stop_reason() == "end_turn"
    _, status, shown = run.tool_call("local: crash")
    assert status == "failed"
    assert "closed the connection during the call" in shown
    assert "about to crash: goodbye" in shown
    assert "about to crash: goodbye" in run.tool_results()["mcp__local__crash"]


def test_acpx_a_changed_tool_list_reaches_the_models_next_request(
    fake_llm: FakeLLM, env: dict[str, str], workspace: Path, tmp_path: Path, mark: str
) -> None:
    config = write_config(
        tmp_path / "agent.toml", fake_llm.base_url, {"local": stdio_table(mark=mark)}
    )

    run = run_acpx(fake_llm, env, workspace, config, tool("mcp__local__grow"))

    assert run.returncode == 0, explain(run)
    first, follow_up = run.requests
    offered = [{t["function"]["name"] for t in body["tools"]} for body in (first, follow_up)]
    assert "mcp__local__grown" not in offered[0]
    assert "mcp__local__grown" in offered[1]


def test_acpx_a_destructive_tool_asks_and_a_read_only_one_does_not(
    fake_llm: FakeLLM, env: dict[str, str], workspace: Path, tmp_path: Path, mark: str
) -> None:
    trusted = {**stdio_table(mark=mark), "trusted": True}  # its readOnlyHint is believed
    config = write_config(tmp_path / "agent.toml", fake_llm.base_url, {"local": trusted})

    run = run_acpx(
        fake_llm,
        env,
        workspace,
        config,
        tool("mcp__local__echo", text="read") + tool("mcp__local__wipe", path="/tmp/all"),
        "--approve-reads",
    )

    assert run.returncode == PERMISSION_DENIED_EXIT, explain(run)
    [asked] = [m["params"] for m in run.requests_for("session/request_permission")]
    assert asked["toolCall"]["title"] == "local: wipe"
    assert [o["kind"] for o in asked["options"]] == ["allow_once", "reject_once"]
    assert run.tool_call("local: echo")[1] == "completed"
    assert run.tool_call("local: wipe")[1] == "failed"
    results = run.tool_results()
    assert results["mcp__local__echo"] == "read"
    assert "rejected" in results["mcp__local__wipe"]


def test_acpx_shows_mcp_and_runs_a_servers_prompt_as_a_slash_command(
    fake_llm: FakeLLM, env: dict[str, str], workspace: Path, tmp_path: Path, mark: str
) -> None:
    config = write_config(
        tmp_path / "agent.toml", fake_llm.base_url, {"local": stdio_table(mark=mark)}
    )

    status = run_acpx(fake_llm, env, workspace, config, "/mcp")
    greeted = run_acpx(fake_llm, env, workspace, config, "/local:greet Ada")

    assert status.returncode == 0, explain(status)
    assert status.requests == [], "/mcp is answered without the model"
    assert "MCP server 'local'" in status.text() and "ready" in status.text()
    assert "mcp__local__echo" in status.text() and "/local:greet" in status.text()
    # The server connects after the session's answer: its prompts come in a later update.
    *_, commands = status.updates("available_commands_update")
    assert "local:greet" in [c["name"] for c in commands["availableCommands"]]
    assert greeted.returncode == 0, explain(greeted)
    [request] = greeted.requests
    assert request["messages"][-1] == {"role": "user", "content": "Please greet Ada warmly."}


def test_acpx_advertises_no_elicitation_so_a_servers_question_is_declined(
    fake_llm: FakeLLM, env: dict[str, str], workspace: Path, tmp_path: Path, mark: str
) -> None:
    config = write_config(
        tmp_path / "agent.toml", fake_llm.base_url, {"local": stdio_table(mark=mark)}
    )

    run = run_acpx(fake_llm, env, workspace, config, tool("mcp__local__ask"))

    assert run.returncode == 0, explain(run)
    [initialize] = run.requests_for("initialize")
    assert "elicitation" not in initialize["params"]["clientCapabilities"]
    assert run.requests_for("elicitation/create") == []
    assert run.tool_results() == {"mcp__local__ask": "error: Elicitation not supported"}
