"""What the model is told of the project, end to end: the agent as a subprocess, driven by
the `agent-client-protocol` client, in a real repository on disk; the request the fake LLM
receives is the oracle.

Instruction files (user, project root down to the cwd, edits seen on the next turn), the
editor's `systemPrompt` (append, override, refusals that open no session, kept on load),
Agent Skills (listed, body absent until asked for), prompt files as slash commands, and
`acp-agent run` with and without `--no-project-instructions`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import (
    AgentMessageChunk,
    AvailableCommandsUpdate,
    ClientCapabilities,
    Implementation,
)
from e2e_support import AGENT_COMMAND, checked_agent_process
from fake_llm import FakeLLM, last_user_text, message_text

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

TIMEOUT = 20.0


class Editor:
    """Records what the agent sends; asks nothing (no fs, no terminal)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")

    def text(self, session_id: str) -> str:
        return "".join(
            u.content.text
            for sid, u in self.updates
            if sid == session_id and isinstance(u, AgentMessageChunk) and u.content.type == "text"
        )

    def commands(self, session_id: str) -> list[str]:
        lists = [
            [c.name for c in u.available_commands]
            for sid, u in self.updates
            if sid == session_id and isinstance(u, AvailableCommandsUpdate)
        ]
        return lists[-1] if lists else []


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with instructions at its root and in `pkg/`, where the session works."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "AGENTS.md").write_text("ROOT RULE: run make check before you finish.\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "CLAUDE.md").write_text("PKG RULE: this package uses tabs.\n")
    return root


@pytest.fixture
def env_with_user_rules(agent_env: dict[str, str]) -> dict[str, str]:
    user_dir = Path(agent_env["HOME"]) / ".config" / "acp-agent"
    user_dir.mkdir(parents=True, exist_ok=True)
    (user_dir / "AGENTS.md").write_text("USER RULE: answer in English.\n")
    return agent_env


@asynccontextmanager
async def editor_session(
    env: dict[str, str], stderr: Path, cwd: Path
) -> AsyncIterator[tuple[Any, Editor]]:
    editor = Editor()
    with stderr.open("ab") as err:
        async with checked_agent_process(
            editor, *AGENT_COMMAND, env=env, cwd=cwd, transport_kwargs={"stderr": err}
        ) as (conn, _):
            answer = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=1,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name="e2e-project", version="0"),
                ),
                TIMEOUT,
            )
            assert answer.agent_capabilities is not None
            yield conn, editor


def system_text(body: dict[str, Any]) -> str:
    first = (body.get("messages") or [{}])[0]
    assert first.get("role") in ("system", "developer"), first
    return message_text(first)


async def say(conn: Any, session_id: str, text: str) -> Any:
    return await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=[text_block(text)]), TIMEOUT
    )


async def new_session(conn: Any, cwd: Path, **extra: Any) -> str:
    """`session/new` as JSON, with fields the pinned client's models do not know."""
    params = {"cwd": str(cwd), "mcpServers": [], **extra}
    answer = await asyncio.wait_for(conn._conn.send_request("session/new", params), TIMEOUT)
    return str(answer["sessionId"])


async def test_the_model_gets_user_root_and_nearest_instructions_in_that_order_and_edits(
    fake_llm: FakeLLM, env_with_user_rules: dict[str, str], agent_stderr: Path, repo: Path
) -> None:
    cwd = repo / "pkg"
    async with editor_session(env_with_user_rules, agent_stderr, cwd) as (conn, _):
        session_id = await new_session(conn, cwd)
        await say(conn, session_id, "hello")
        (cwd / "CLAUDE.md").write_text("PKG RULE: this package uses four spaces now.\n")
        await say(conn, session_id, "again")

    first, second = (system_text(body) for body in fake_llm.requests[:2])
    user, root, near = (first.index(rule) for rule in ("USER RULE", "ROOT RULE", "PKG RULE"))
    assert user < root < near  # nearer files come later: they win on conflict
    assert str(repo / "AGENTS.md") in first and str(cwd / "CLAUDE.md") in first
    assert "uses tabs" in first and "four spaces" not in first
    assert "four spaces now" in second and "uses tabs" not in second


async def test_the_editor_prompt_is_appended_or_replaces_the_default_and_is_kept_on_load(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, repo: Path
) -> None:
    append = {"mode": "append", "content": [{"type": "text", "text": "EDITOR: be brief."}]}
    override = {"mode": "override", "content": [{"type": "text", "text": "EDITOR ONLY PROMPT"}]}
    async with editor_session(agent_env, agent_stderr, repo) as (conn, _):
        appended = await new_session(conn, repo, systemPrompt=append)
        await say(conn, appended, "one")
        replaced = await new_session(conn, repo, systemPrompt=override)
        await say(conn, replaced, "two")
    async with editor_session(agent_env, agent_stderr, repo) as (conn, _):
        await asyncio.wait_for(
            conn.load_session(cwd=str(repo), session_id=appended, mcp_servers=[]), TIMEOUT
        )
        await say(conn, appended, "three")

    with_append, with_override, after_load = (system_text(b) for b in fake_llm.requests[:3])
    assert with_append.rstrip().endswith("EDITOR: be brief.")
    assert "ROOT RULE" in with_append  # our instructions stay, the editor's come after them
    assert with_override.startswith("EDITOR ONLY PROMPT")
    assert "ROOT RULE" in with_override  # the project's instructions stay under an override
    assert "EDITOR ONLY PROMPT" not in with_append
    assert after_load == with_append  # kept with the session, in a new process


@pytest.mark.parametrize(
    ("system_prompt", "problem"),
    [
        ({"mode": "replace-all", "content": [{"type": "text", "text": "x"}]}, "mode"),
        ({"mode": "append", "content": []}, "content"),
        (
            {
                "mode": "append",
                "content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}],
            },
            "content.0",
        ),
    ],
)
async def test_a_system_prompt_the_agent_cannot_apply_is_refused_and_opens_no_session(
    fake_llm: FakeLLM,
    agent_env: dict[str, str],
    agent_stderr: Path,
    repo: Path,
    system_prompt: dict[str, Any],
    problem: str,
) -> None:
    async with editor_session(agent_env, agent_stderr, repo) as (conn, _):
        with pytest.raises(RequestError) as refused:
            await new_session(conn, repo, systemPrompt=system_prompt)
        listed = await asyncio.wait_for(conn.list_sessions(), TIMEOUT)

    assert refused.value.code == -32602
    assert f"systemPrompt.{problem}" in str(refused.value)
    assert listed.sessions == []


async def test_skills_are_listed_with_their_path_and_their_body_comes_only_when_asked_for(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, repo: Path
) -> None:
    skill = repo / ".agents" / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Writes release notes from the git log.\n---\n"
        "SKILL BODY: group the changes by component.\n"
    )
    async with editor_session(agent_env, agent_stderr, repo) as (conn, editor):
        session_id = await new_session(conn, repo)
        await say(conn, session_id, "what can you do?")
        await say(conn, session_id, "use $release-notes for v2")
        await say(conn, session_id, "/skills")

    listed, asked = fake_llm.requests[:2]
    assert "release-notes" in system_text(listed)
    assert "Writes release notes from the git log." in system_text(listed)
    assert str(skill / "SKILL.md") in system_text(listed)
    assert "SKILL BODY" not in json.dumps(listed)  # progressive disclosure
    assert "SKILL BODY: group the changes" in last_user_text(asked)
    assert len(fake_llm.requests) == 2  # /skills is answered by us
    assert "release-notes: Writes release notes" in editor.text(session_id)


async def test_a_prompt_file_is_a_slash_command_with_its_arguments_filled_in(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, repo: Path
) -> None:
    commands = repo / ".agents" / "commands"
    commands.mkdir(parents=True)
    (commands / "fix-issue.md").write_text(
        "---\ndescription: Fix a numbered issue\nargument-hint: NUMBER\n---\n"
        "Fix issue #$1 ($ARGUMENTS), then run the tests.\n"
    )
    async with editor_session(agent_env, agent_stderr, repo) as (conn, editor):
        session_id = await new_session(conn, repo)
        await say(conn, session_id, "/fix-issue 42 urgent")
        await say(conn, session_id, "/context")

    assert "fix-issue" in editor.commands(session_id)
    assert last_user_text(fake_llm.requests[0]).strip() == (
        "Fix issue #42 (42 urgent), then run the tests."
    )
    context = editor.text(session_id)
    assert str(repo / "AGENTS.md") in context
    assert "/fix-issue" in context and "tokens" in context


def run_headless(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_agent", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def test_a_headless_run_reads_the_instructions_unless_told_not_to(
    fake_llm: FakeLLM, agent_env: dict[str, str], repo: Path
) -> None:
    with_rules = run_headless(agent_env, repo, "hello")
    without = run_headless(agent_env, repo, "--no-project-instructions", "hello")

    assert with_rules.returncode == 0, with_rules.stderr
    assert without.returncode == 0, without.stderr
    assert "ROOT RULE" in system_text(fake_llm.requests[0])
    assert "ROOT RULE" not in system_text(fake_llm.requests[1])


def test_a_headless_run_runs_a_prompt_file(
    fake_llm: FakeLLM, agent_env: dict[str, str], repo: Path
) -> None:
    (repo / ".agents" / "commands").mkdir(parents=True)
    (repo / ".agents" / "commands" / "review.md").write_text("Review $ARGUMENTS carefully.\n")

    done = run_headless(agent_env, repo, "/review", "src/app.py")

    assert done.returncode == 0, done.stderr
    assert last_user_text(fake_llm.requests[0]).strip() == "Review src/app.py carefully."


async def test_a_prompt_file_added_while_the_session_runs_is_announced_before_the_next_prompt(
    fake_llm: FakeLLM, env_with_user_rules: dict[str, str], agent_stderr: Path, repo: Path
) -> None:
    user_commands = Path(env_with_user_rules["HOME"]) / ".config" / "acp-agent" / "commands"
    user_commands.mkdir(parents=True)
    (user_commands / "ship.md").write_text("USER SHIP\n")
    async with editor_session(env_with_user_rules, agent_stderr, repo) as (conn, editor):
        session_id = await new_session(conn, repo)
        await say(conn, session_id, "hello")
        assert "ship" in editor.commands(session_id)
        (repo / ".agents" / "commands" / "git").mkdir(parents=True)
        (repo / ".agents" / "commands" / "ship.md").write_text("PROJECT SHIP $ARGUMENTS\n")
        (repo / ".agents" / "commands" / "git" / "log.md").write_text("Show the log.\n")
        await say(conn, session_id, "/help")
        await say(conn, session_id, "/ship now")

    assert {"ship", "git:log"} <= set(editor.commands(session_id))
    help_text = editor.text(session_id)
    assert "/ship" in help_text and str(user_commands / "ship.md") in help_text  # hidden, shown
    assert last_user_text(fake_llm.requests[-1]).strip() == "PROJECT SHIP now"
