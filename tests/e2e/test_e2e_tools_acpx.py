"""Built-in tools through `acpx` (the npm headless ACP client, pinned in package.json): its
real `fs/*` (confined to `--cwd`), its real terminals and its permission modes drive
`python -m acp_agent`; the fake LLM scripts the tool calls (`[[tool NAME {json}]]`).

Run `npm install` at the repository root first; without `node_modules/.bin/acpx` these
tests are skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acpx_support
import pytest
from acpx_support import needs_acpx
from e2e_support import API_KEY, HELLO_TEXT, MODEL, tool
from fake_llm import FakeLLM, message_text

PERMISSION_DENIED_EXIT = 5  # acpx: every permission request was denied
REJECTED = "The user rejected this tool call."

pytestmark = [pytest.mark.e2e, needs_acpx]


@dataclass
class Run:
    """One `acpx exec`: its exit code, the JSON-RPC exchange it printed, and the model's view."""

    returncode: int
    messages: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    stderr: str

    def requests_for(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("method") == method]

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The response to `request`: the next message with its id (ids repeat across
        directions, but the agent's requests are answered before the turn goes on); a
        prompt's answer is the one with a stop reason."""
        index = self.messages.index(request)
        for message in self.messages[index + 1 :]:
            if (
                message.get("id") == request["id"]
                and "method" not in message
                and (
                    request["method"] != "session/prompt"
                    or "stopReason" in message.get("result", {})
                )
            ):
                return message
        raise AssertionError(f"no answer to {request}")

    def stop_reason(self) -> str:
        [prompt] = self.requests_for("session/prompt")
        return str(self.answer(prompt)["result"]["stopReason"])

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.requests_for("session/update")
            if m["params"]["update"].get("sessionUpdate") == kind
        ]

    def tool_call(self, title: str) -> dict[str, Any]:
        [start] = [u for u in self.updates("tool_call") if u["title"] == title]
        return start

    def tool_updates(self, tool_call_id: str) -> list[dict[str, Any]]:
        return [u for u in self.updates("tool_call_update") if u["toolCallId"] == tool_call_id]

    def final_status(self, tool_call_id: str) -> str | None:
        statuses = [u["status"] for u in self.tool_updates(tool_call_id) if "status" in u]
        return statuses[-1] if statuses else None

    def tool_results(self) -> list[str]:
        """The tool messages the model got in its last request."""
        results: list[str] = []
        for message in reversed(self.requests[-1]["messages"]):
            if message["role"] != "tool":
                break
            results.insert(0, message_text(message))
        return results


def run_acpx(fake: FakeLLM, env: dict[str, str], cwd: Path, prompt: str, *permissions: str) -> Run:
    """`acpx <permissions> exec PROMPT` against our agent, in json-strict mode."""
    before = len(fake.requests)
    done = acpx_support.run_acpx(
        env, cwd, "exec", prompt, options=permissions or ("--approve-all",)
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return Run(
        returncode=done.returncode,
        messages=[json.loads(line) for line in lines],  # json-strict: every line is JSON
        requests=fake.requests[before:],
        stderr=done.stderr,
    )


def explain(run: Run) -> str:
    return f"acpx exited {run.returncode}\nstderr: {run.stderr[-2000:]}"


# --- approve-all: files and a command through acpx ---------------------------------------


def test_acpx_runs_read_write_edit_and_shell_through_its_real_fs_and_terminals(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    hello = workspace / "hello.txt"
    (workspace / "notes.txt").write_text("one\ntwo\nthree\nfour\n", encoding="utf-8")
    created = workspace / "made" / "new.txt"
    created.parent.mkdir()
    command = "echo shell-$((6*7)); pwd; exit 3"

    run = run_acpx(
        fake_llm,
        agent_env,
        workspace,
        tool("read_file", path="notes.txt", line=2, limit=2)
        + tool("write_file", path="made/new.txt", content="created by acpx\n")
        + tool("edit_file", path="hello.txt", old_text="Second line.", new_text="2nd line.")
        + tool("shell", command=command),
    )

    assert run.returncode == 0, explain(run)
    assert run.stop_reason() == "end_turn"
    assert created.read_text(encoding="utf-8") == "created by acpx\n"
    assert hello.read_text(encoding="utf-8") == HELLO_TEXT.replace("Second line.", "2nd line.")

    reads = [m["params"] for m in run.requests_for("fs/read_text_file")]
    assert reads[0]["path"] == str(workspace / "notes.txt")
    assert reads[0]["line"] == 2 and reads[0]["limit"] >= 2
    writes = [m["params"] for m in run.requests_for("fs/write_text_file")]
    assert [(w["path"], w["content"]) for w in writes] == [
        (str(created), "created by acpx\n"),
        (str(hello), HELLO_TEXT.replace("Second line.", "2nd line.")),
    ]
    [create] = [m["params"] for m in run.requests_for("terminal/create")]
    assert (create["command"], create["args"], create["cwd"]) == (
        "bash",
        ["-c", command],
        str(workspace),
    )
    assert create["outputByteLimit"] > 0
    [released] = [m["params"] for m in run.requests_for("terminal/release")]
    terminal_id = run.answer(run.requests_for("terminal/create")[0])["result"]["terminalId"]
    assert released["terminalId"] == terminal_id

    shell = run.tool_call(command)
    assert shell["kind"] == "execute"
    shown = [c for u in run.tool_updates(shell["toolCallId"]) for c in u.get("content", [])]
    assert {"type": "terminal", "terminalId": terminal_id} in shown
    write = run.tool_call("Write made/new.txt")
    [diff] = [c for u in run.tool_updates(write["toolCallId"]) for c in u.get("content", [])]
    assert diff["type"] == "diff" and diff.get("oldText") is None
    assert diff["newText"] == "created by acpx\n"
    for start in run.updates("tool_call"):
        # The command exits 3: its call fails on screen.
        expected = "failed" if start["toolCallId"] == shell["toolCallId"] else "completed"
        assert run.final_status(start["toolCallId"]) == expected, start["title"]

    read, written, edited, ran = run.tool_results()
    assert "two" in read and "three" in read and "one" not in read
    assert f"Created {created}" in written
    assert f"Edited {hello}" in edited
    assert "shell-42" in ran and str(workspace) in ran and "[exit code 3]" in ran
    assert run.requests[0]["model"] == MODEL


# --- outside --cwd -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def outside_write(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, Path]]:
    """One acpx run whose write targets a file outside --cwd (approved by --approve-all)."""
    root = tmp_path_factory.mktemp("acpx-outside")
    workspace = root / "workspace"
    workspace.mkdir()
    home = root / "home"
    home.mkdir()
    outside = root / "outside.txt"
    outside.write_text("outside, untouched\n", encoding="utf-8")
    with FakeLLM() as fake:
        env = {
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_BASE_URL": fake.base_url,
            "ACP_AGENT_MODEL": MODEL,
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
        }
        prompt = tool("write_file", path=str(outside), content="overwritten\n") + tool(
            "write_file", path="inside.txt", content="inside\n"
        )
        yield run_acpx(fake, env, workspace, prompt), outside


def test_acpx_refuses_a_write_outside_cwd_the_tool_call_fails_and_the_turn_ends_end_turn(
    outside_write: tuple[Run, Path],
) -> None:
    run, outside = outside_write

    assert run.returncode == 0, explain(run)
    assert run.stop_reason() == "end_turn"
    assert outside.read_text(encoding="utf-8") == "outside, untouched\n"
    refused = [
        run.answer(m)
        for m in run.messages
        if m.get("method", "").startswith("fs/") and m["params"]["path"] == str(outside)
    ]
    assert refused and all("error" in answer for answer in refused), "acpx refused it"
    start = run.tool_call(f"Write {outside}")
    assert run.final_status(start["toolCallId"]) == "failed"
    failed, succeeded = run.tool_results()
    assert str(outside) in failed
    assert "Created" in succeeded, "the turn went on after the refusal"
    assert (outside.parent / "workspace" / "inside.txt").read_text(encoding="utf-8") == "inside\n"


def test_acpx_refusal_reason_for_a_path_outside_cwd_reaches_the_model(
    outside_write: tuple[Run, Path],
) -> None:
    run, _ = outside_write

    failed, _ = run.tool_results()
    assert "outside allowed cwd" in failed, failed


# --- permission modes --------------------------------------------------------------------


def test_acpx_deny_all_rejects_the_tool_calls_and_the_model_is_told(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    run = run_acpx(
        fake_llm,
        agent_env,
        workspace,
        tool("read_file", path="hello.txt")
        + tool("write_file", path="denied.txt", content="no\n")
        + tool("shell", command="touch shell-ran"),
        "--deny-all",
    )

    assert run.returncode == PERMISSION_DENIED_EXIT, explain(run)
    assert run.stop_reason() == "end_turn"
    asked = run.requests_for("session/request_permission")
    assert [m["params"]["toolCall"]["title"] for m in asked] == [
        "Write denied.txt",
        "touch shell-ran",
    ]
    assert [run.answer(m)["result"]["outcome"]["optionId"] for m in asked] == ["reject_once"] * 2
    assert run.requests_for("fs/write_text_file") == []
    assert run.requests_for("terminal/create") == []
    assert not (workspace / "denied.txt").exists()
    assert not (workspace / "shell-ran").exists()
    for start in run.updates("tool_call"):
        assert run.final_status(start["toolCallId"]) == "failed"
    read, written, ran = run.tool_results()
    assert "could not read" in read, "acpx --deny-all refuses even fs reads"
    assert REJECTED in written and REJECTED in ran


def test_acpx_policy_denies_commands_while_approving_edits(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"autoDeny": ["execute"]}), encoding="utf-8")

    run = run_acpx(
        fake_llm,
        agent_env,
        workspace,
        tool("write_file", path="allowed.txt", content="yes\n")
        + tool("shell", command="touch shell-ran"),
        "--approve-all",
        "--policy",
        str(policy),
    )

    assert run.returncode == 0, explain(run)
    assert run.stop_reason() == "end_turn"
    answers = {
        m["params"]["toolCall"]["kind"]: run.answer(m)["result"]["outcome"]["optionId"]
        for m in run.requests_for("session/request_permission")
    }
    assert answers == {"edit": "allow_once", "execute": "reject_once"}
    assert (workspace / "allowed.txt").read_text(encoding="utf-8") == "yes\n"
    assert run.requests_for("terminal/create") == []
    assert not (workspace / "shell-ran").exists()
    written, rejected = run.tool_results()
    assert "Created" in written and REJECTED in rejected


# --- what acpx is shown before it approves, and how each call ends -----------------------


def test_acpx_gets_each_change_with_its_permission_request_and_the_same_call_ends_with_raw_output(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    notes = workspace / "notes.txt"
    notes.write_text("alpha\nbeta\n", encoding="utf-8")
    command = "echo checking; exit 3"
    edit = {"path": "notes.txt", "old_text": "beta", "new_text": "gamma"}

    run = run_acpx(
        fake_llm,
        agent_env,
        workspace,
        tool("edit_file", **edit)
        + tool("write_file", path="new.txt", content="new\n")
        + tool("shell", command=command)
        + tool("read_file", path="notes.txt"),
    )

    assert run.returncode == 0, explain(run)
    assert run.stop_reason() == "end_turn"
    starts = run.updates("tool_call")
    assert [(s["name"], s["rawInput"]) for s in starts] == [
        ("edit_file", edit),
        ("write_file", {"path": "new.txt", "content": "new\n"}),
        ("shell", {"command": command}),
        ("read_file", {"path": "notes.txt"}),
    ]
    edited, written, ran, read = starts
    asked = [m["params"]["toolCall"] for m in run.requests_for("session/request_permission")]
    assert [a["toolCallId"] for a in asked] == [s["toolCallId"] for s in (edited, written, ran)]
    diff = {"type": "diff", "path": str(notes), "oldText": "alpha\nbeta\n"}
    diff["newText"] = "alpha\ngamma\n"
    assert asked[0]["content"] == edited["content"] == [diff]
    assert asked[0]["locations"] == [{"path": str(notes)}]
    new_file = {"type": "diff", "path": str(workspace / "new.txt"), "newText": "new\n"}
    assert asked[1]["content"] == [new_file]
    line = {"type": "content", "content": {"type": "text", "text": f"```sh\n{command}\n```"}}
    assert asked[2]["content"] == [line]
    assert [a["name"] for a in asked] == ["edit_file", "write_file", "shell"]

    def last(start: dict[str, Any]) -> dict[str, Any]:
        return run.tool_updates(start["toolCallId"])[-1]

    assert last(edited)["status"] == "completed" and last(edited)["content"] == [diff]
    assert last(edited)["rawOutput"]["replacements"] == 1
    assert last(written)["rawOutput"]["created"] is True
    assert last(ran)["status"] == "failed"
    assert last(ran)["content"][-1]["content"]["text"] == "Exited with code 3."
    assert last(ran)["rawOutput"]["exit_code"] == 3
    text = "```notes.txt#L1-2\nalpha\ngamma\n```"
    assert last(read)["content"] == [{"type": "content", "content": {"type": "text", "text": text}}]
    assert last(read)["rawOutput"]["lines"] == 2
    assert "[exit code 3]" in run.tool_results()[2]
