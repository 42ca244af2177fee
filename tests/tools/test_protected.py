"""Writes to protected places always ask, in every mode but bypass, and no "always" answer
covers them: a prompt injection must not be able to make itself permanent."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from tool_fakes import FakeEditor, make_context

from acp_agent.protocol.client import _permission_options
from acp_agent.tools import (
    PermissionMemory,
    PermissionMode,
    Tool,
    ToolContext,
    ToolParams,
    builtin_tools,
    decide,
)
from acp_agent.tools.protected import protected_reason

TOOLS = builtin_tools()

PROTECTED = [
    ".git/config",
    ".git/hooks/pre-commit",
    "sub/module/.git/config",
    ".git",
    ".agents/skills/deploy/SKILL.md",
    ".claude/settings.json",
    ".claude/commands/x.md",
    "AGENTS.md",
    "docs/AGENTS.md",
    "agents.md",
    "CLAUDE.md",
    "src/../.git/config",
]
ORDINARY = ["README.md", "src/app.py", "gitconfig", ".github/workflows/ci.yml", "AGENTS.md.bak"]


@pytest.fixture
def ctx(root: Path) -> ToolContext:
    return make_context(root, FakeEditor())


def write(path: str) -> tuple[Tool[Any], ToolParams]:
    tool = TOOLS["write_file"]
    return tool, tool.params_model.model_validate({"path": path, "content": "x"})


def edit(path: str) -> tuple[Tool[Any], ToolParams]:
    tool = TOOLS["edit_file"]
    arguments = {"path": path, "old_text": "a", "new_text": "b"}
    return tool, tool.params_model.model_validate(arguments)


@pytest.mark.parametrize("path", PROTECTED)
@pytest.mark.parametrize("make_call", [write, edit], ids=["write_file", "edit_file"])
def test_a_write_to_a_protected_path_asks_even_where_edits_run_unasked(
    ctx: ToolContext, path: str, make_call: Any
) -> None:
    tool, params = make_call(path)
    expected: dict[PermissionMode, str] = {
        "ask": "ask",
        "accept-edits": "ask",
        "bypass": "allow",
        "read-only": "reject",
    }
    for mode, verdict in expected.items():
        assert decide(tool, params, ctx, mode, PermissionMemory()) == verdict, mode


@pytest.mark.parametrize("path", ORDINARY)
def test_ordinary_files_are_not_protected(ctx: ToolContext, path: str) -> None:
    tool, params = write(path)
    assert decide(tool, params, ctx, "accept-edits", PermissionMemory()) == "allow"


@pytest.mark.parametrize("path", PROTECTED)
def test_no_always_answer_is_offered_kept_or_applied_for_a_protected_write(
    ctx: ToolContext, path: str
) -> None:
    memory = PermissionMemory()
    ordinary = write("README.md")
    memory.remember("allow_always", *ordinary, ctx)  # "always allow write_file"
    assert decide(*ordinary, ctx, "ask", memory) == "allow"

    protected = write(path)
    assert _permission_options(memory.describe(*protected, ctx)) == [
        ("allow_once", "Allow"),
        ("reject_once", "Reject"),
    ]
    assert decide(*protected, ctx, "ask", memory) == "ask"
    # A client that answers "allow_always" anyway (it was not offered) changes nothing.
    before = memory.to_json()
    memory.remember("allow_always", *protected, ctx)
    assert memory.to_json() == before
    assert decide(*protected, ctx, "ask", memory) == "ask"


def test_an_always_reject_of_the_tool_still_holds_for_protected_paths(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    memory.remember("reject_always", *write("README.md"), ctx)
    assert decide(*write("AGENTS.md"), ctx, "accept-edits", memory) == "reject"


def test_a_symlink_into_git_is_protected_under_any_name(root: Path, ctx: ToolContext) -> None:
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "notes.txt").symlink_to(root / ".git" / "hooks" / "pre-commit")
    (root / "docs").symlink_to(root / ".claude", target_is_directory=True)

    assert decide(*write("notes.txt"), ctx, "accept-edits", PermissionMemory()) == "ask"
    assert decide(*write("docs/settings.json"), ctx, "accept-edits", PermissionMemory()) == "ask"


def test_a_project_inside_a_dot_claude_directory_is_not_protected_as_a_whole(
    tmp_path: Path,
) -> None:
    project = tmp_path / ".claude" / "projects" / "app"
    project.mkdir(parents=True)
    ctx = make_context(project, FakeEditor())
    assert decide(*write("main.py"), ctx, "accept-edits", PermissionMemory()) == "allow"
    assert decide(*write("CLAUDE.md"), ctx, "accept-edits", PermissionMemory()) == "ask"


def test_the_agents_own_config_and_credentials_are_protected(tmp_path: Path, root: Path) -> None:
    config_dir = tmp_path / "home" / ".config" / "acp-agent"
    config_dir.mkdir(parents=True)
    explicit = root / "ci" / "agent.toml"  # a --config file inside the project
    ctx = dataclasses.replace(
        make_context(root, FakeEditor(), extra_roots=[tmp_path / "home"]),
        protected_files=(config_dir, explicit),
    )
    for path in (config_dir / "credentials.json", config_dir / "config.toml", explicit):
        assert protected_reason(path, ctx) == "the agent's own configuration"
        assert decide(*write(str(path)), ctx, "accept-edits", PermissionMemory()) == "ask"
    assert decide(*write("ci/other.toml"), ctx, "accept-edits", PermissionMemory()) == "allow"


def test_reading_protected_files_still_runs(ctx: ToolContext) -> None:
    tool = TOOLS["read_file"]
    for path in (".git/config", "AGENTS.md"):
        params = tool.params_model.model_validate({"path": path})
        assert decide(tool, params, ctx, "ask", PermissionMemory()) == "allow"
