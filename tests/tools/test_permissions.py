from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from tool_fakes import FakeEditor, make_context

from acp_agent.protocol.client import _permission_options
from acp_agent.tools import (
    MODES,
    PermissionMemory,
    PermissionMode,
    Tool,
    ToolContext,
    ToolParams,
    builtin_tools,
    decide,
    tools_for_mode,
)
from acp_agent.tools.edit_file import EditFileParams
from acp_agent.tools.plan import PlanParams
from acp_agent.tools.read_file import ReadFileParams
from acp_agent.tools.search import SearchParams
from acp_agent.tools.shell import ShellParams
from acp_agent.tools.write_file import WriteFileParams

TOOLS = builtin_tools()
ALL_MODES: list[PermissionMode] = ["ask", "accept-edits", "bypass", "read-only"]


@pytest.fixture
def ctx(root: Path) -> ToolContext:
    return make_context(root, FakeEditor())


def call(name: str, **arguments: Any) -> tuple[Tool[Any], ToolParams]:
    tool = TOOLS[name]
    return tool, tool.params_model.model_validate(arguments)


def verdict(
    ctx: ToolContext,
    mode: PermissionMode,
    name: str,
    memory: PermissionMemory | None = None,
    **arguments: Any,
) -> str:
    tool, params = call(name, **arguments)
    return decide(tool, params, ctx, mode, memory or PermissionMemory())


# --- modes ---------------------------------------------------------------------------------


def test_every_mode_is_listed_with_a_name_and_description() -> None:
    assert [mode.id for mode in MODES] == ALL_MODES
    assert all(mode.name and mode.description for mode in MODES)


def test_read_only_mode_offers_no_tool_with_side_effects() -> None:
    # A subagent of a read-only session is read-only too: it may be offered.
    assert list(tools_for_mode(TOOLS, "read-only")) == [
        "read_file",
        "search",
        "job_output",
        "plan",
        "agent",
        "web_fetch",  # offered, though it asks before each host (and refuses private ones)
    ]
    for mode in ("ask", "accept-edits", "bypass"):
        assert list(tools_for_mode(TOOLS, mode)) == list(TOOLS)


INSIDE: dict[str, dict[str, Any]] = {
    "read_file": {"path": "a.txt"},
    "search": {"grep": "x"},
    "plan": {"entries": []},
    "write_file": {"path": "a.txt", "content": ""},
    "edit_file": {"path": "a.txt", "old_text": "a", "new_text": "b"},
    "shell": {"command": "ls"},
}
EXPECTED_INSIDE = {
    #               read     search   plan     write     edit      shell
    "ask": ["allow", "allow", "allow", "ask", "ask", "ask"],
    "accept-edits": ["allow", "allow", "allow", "allow", "allow", "ask"],
    "bypass": ["allow", "allow", "allow", "allow", "allow", "allow"],
    "read-only": ["allow", "allow", "allow", "reject", "reject", "reject"],
}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_each_mode_decides_each_kind_of_tool_inside_the_roots(
    ctx: ToolContext, mode: PermissionMode
) -> None:
    got = [verdict(ctx, mode, name, **arguments) for name, arguments in INSIDE.items()]

    assert got == EXPECTED_INSIDE[mode]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_path_outside_the_roots_asks_in_every_mode_but_bypass(
    ctx: ToolContext, mode: PermissionMode, tmp_path: Path
) -> None:
    outside = str(tmp_path / "elsewhere" / "f.txt")

    read = verdict(ctx, mode, "read_file", path=outside)
    search = verdict(ctx, mode, "search", grep="x", path=str(tmp_path))
    edit = verdict(ctx, mode, "edit_file", path=outside, old_text="a", new_text="b")

    if mode == "bypass":
        assert (read, search, edit) == ("allow", "allow", "allow")
    elif mode == "read-only":
        assert (read, search, edit) == ("ask", "ask", "reject")
    else:
        assert (read, search, edit) == ("ask", "ask", "ask")


def test_dot_dot_cannot_climb_out_of_the_roots(ctx: ToolContext, root: Path) -> None:
    (root / "sub").mkdir()

    assert verdict(ctx, "ask", "read_file", path="sub/../../secret.txt") == "ask"
    assert verdict(ctx, "ask", "read_file", path=f"{root}/sub/../a.txt") == "allow"


def test_a_symlink_pointing_out_of_the_roots_is_outside(
    ctx: ToolContext, root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secrets"
    secret.mkdir()
    (secret / "key").write_text("k")
    (root / "innocent").symlink_to(secret)
    (root / "link.txt").symlink_to(secret / "key")

    assert verdict(ctx, "ask", "read_file", path="innocent/key") == "ask"
    assert verdict(ctx, "accept-edits", "write_file", path="link.txt", content="x") == "ask"
    assert verdict(ctx, "accept-edits", "write_file", path="innocent/new", content="x") == "ask"


def test_a_symlink_loop_counts_as_outside_and_asks_instead_of_crashing(
    ctx: ToolContext, root: Path
) -> None:
    (root / "loop").symlink_to(root / "loop")

    assert verdict(ctx, "ask", "read_file", path="loop") == "ask"
    assert verdict(ctx, "accept-edits", "write_file", path="loop/x", content="x") == "ask"


def test_a_symlink_inside_the_roots_stays_inside(ctx: ToolContext, root: Path) -> None:
    (root / "real").mkdir()
    (root / "alias").symlink_to(root / "real")

    assert verdict(ctx, "accept-edits", "write_file", path="alias/f", content="x") == "allow"


def test_an_additional_root_counts_as_inside(root: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    ctx = make_context(root, FakeEditor(), extra_roots=(extra,))

    assert verdict(ctx, "ask", "read_file", path=str(extra / "f")) == "allow"


# --- remembered answers --------------------------------------------------------------------


def remember(
    memory: PermissionMemory, ctx: ToolContext, decision: Any, name: str, **arguments: Any
) -> None:
    memory.remember(decision, *call(name, **arguments), ctx)


def test_always_allowing_a_read_only_subcommand_covers_it_and_others_only_exactly(
    ctx: ToolContext,
) -> None:
    memory = PermissionMemory()
    remember(memory, ctx, "allow_always", "shell", command="git status")
    remember(memory, ctx, "allow_always", "shell", command="npm test")

    def shell(command: str) -> str:
        return verdict(ctx, "ask", "shell", memory, command=command)

    assert shell("git status --short") == "allow"
    assert shell("git push") == "ask"
    assert shell("npm test") == "allow"
    assert shell("npm test -- --watch") == "ask"
    assert shell("npm install") == "ask"


def test_a_compound_command_needs_every_part_allowed(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    remember(memory, ctx, "allow_always", "shell", command="git status")

    assert verdict(ctx, "ask", "shell", memory, command="git status && git push") == "ask"
    assert verdict(ctx, "ask", "shell", memory, command="git status | npm test") == "ask"

    remember(memory, ctx, "allow_always", "shell", command="git status && git push")

    assert verdict(ctx, "ask", "shell", memory, command="git push; git status -s") == "allow"


def test_a_command_without_scope_is_never_remembered(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    remember(memory, ctx, "allow_always", "shell", command="rm -rf build")
    remember(memory, ctx, "allow_always", "shell", command="echo $(date)")

    assert memory.allowed == set()
    assert verdict(ctx, "ask", "shell", memory, command="rm -rf build") == "ask"


def test_always_reject_refuses_later_calls_of_that_scope_in_every_mode(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    remember(memory, ctx, "reject_always", "shell", command="git push --force")

    for mode in ("ask", "accept-edits", "bypass"):
        push = "git push --force"
        assert verdict(ctx, mode, "shell", memory, command=push) == "reject"
        assert verdict(ctx, mode, "shell", memory, command=f"git status && {push}") == "reject"
    assert verdict(ctx, "ask", "shell", memory, command="git push") == "ask"
    assert verdict(ctx, "ask", "shell", memory, command="git status") == "ask"


def test_rejecting_a_compound_command_does_not_reject_its_parts(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    remember(memory, ctx, "reject_always", "shell", command="git fetch && make deploy")

    assert verdict(ctx, "ask", "shell", memory, command="git fetch; make deploy") == "reject"
    assert verdict(ctx, "ask", "shell", memory, command="git fetch") == "ask"


def test_allowing_later_lifts_an_earlier_reject(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    remember(memory, ctx, "reject_always", "shell", command="make")
    remember(memory, ctx, "allow_always", "shell", command="make")

    assert verdict(ctx, "ask", "shell", memory, command="make") == "allow"


def test_once_answers_are_not_remembered(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    for decision in ("allow_once", "reject_once", "cancelled"):
        remember(memory, ctx, decision, "shell", command="make")

    assert memory == PermissionMemory()


def test_edits_are_remembered_by_tool_name(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    remember(memory, ctx, "allow_always", "edit_file", path="a.py", old_text="a", new_text="b")

    assert verdict(ctx, "ask", "edit_file", memory, path="b.py", old_text="x", new_text="y") == (
        "allow"
    )
    assert verdict(ctx, "ask", "write_file", memory, path="a.py", content="") == "ask"


def test_calls_outside_the_roots_are_remembered_by_tool_and_directory(
    ctx: ToolContext, tmp_path: Path
) -> None:
    docs, other = tmp_path / "docs", tmp_path / "other"
    docs.mkdir()
    other.mkdir()
    memory = PermissionMemory()
    remember(memory, ctx, "allow_always", "read_file", path=str(docs / "a.md"))

    assert verdict(ctx, "ask", "read_file", memory, path=str(docs / "b.md")) == "allow"
    assert verdict(ctx, "ask", "read_file", memory, path=str(other / "b.md")) == "ask"
    assert verdict(ctx, "ask", "search", memory, grep="x", path=str(docs)) == "ask"
    # An edit allowed inside the roots does not reach outside them.
    remember(memory, ctx, "allow_always", "write_file", path="in.txt", content="")
    assert verdict(ctx, "ask", "write_file", memory, path=str(docs / "a.md"), content="") == "ask"


def test_the_memory_round_trips_through_json(ctx: ToolContext) -> None:
    memory = PermissionMemory()
    remember(memory, ctx, "allow_always", "shell", command="git status")
    remember(memory, ctx, "reject_always", "shell", command="git push")

    data = memory.to_json()

    assert data == {"allowed": ["shell:git status"], "rejected": ["shell-exact:git push"]}
    assert PermissionMemory.from_json(data) == memory


def test_the_scope_can_be_described_for_an_always_option(ctx: ToolContext) -> None:
    memory = PermissionMemory()

    assert memory.describe(*call("shell", command="git status -s && make"), ctx) == (
        'git status … on paths inside the project, and exactly "make"'
    )
    assert memory.describe(*call("shell", command="rm -rf x"), ctx) is None
    assert memory.describe(*call("edit_file", path="a", old_text="a", new_text="b"), ctx) == (
        "edit_file"
    )


@pytest.mark.parametrize(
    ("command", "label"),
    [
        ("ls && echo a && echo b", "ls …, echo … on paths inside the project"),
        ("git status -s; git status", "git status … on paths inside the project"),
        ("make test", 'exactly "make test"'),
        ("make test && make test", 'exactly "make test"'),
        ("make 'a b'", "exactly \"make 'a b'\""),
        (
            "cd src && make test; npm run lint",
            'exactly "cd src", "make test" and "npm run lint"',
        ),
        (
            "git status -s && make test 2>&1 | tail -5",
            'git status …, tail … on paths inside the project, and exactly "make test"',
        ),
        ("cat ~/.ssh/id_rsa", None),
        ("cat README.md > ~/x", None),
    ],
)
def test_a_shell_scope_is_labelled_in_plain_words_once_per_command(
    ctx: ToolContext, command: str, label: str | None
) -> None:
    (ctx.cwd / "src").mkdir()

    assert PermissionMemory().describe(*call("shell", command=command), ctx) == label


def test_the_always_options_name_exactly_what_they_cover(ctx: ToolContext) -> None:
    memory = PermissionMemory()

    def options(command: str) -> list[tuple[str, str]]:
        return _permission_options(memory.describe(*call("shell", command=command), ctx))

    assert options("ls && echo a && echo b") == [
        ("allow_once", "Allow"),
        ("allow_always", "Always allow ls …, echo … on paths inside the project"),
        ("reject_once", "Reject"),
        ("reject_always", "Always reject ls …, echo … on paths inside the project"),
    ]
    assert options("make test")[1] == ("allow_always", 'Always allow exactly "make test"')
    assert options("cat /etc/passwd") == [("allow_once", "Allow"), ("reject_once", "Reject")]


def test_plan_and_other_read_only_calls_never_ask(ctx: ToolContext) -> None:
    tool, params = call("plan", entries=[])

    assert isinstance(params, PlanParams)
    for mode in ALL_MODES:
        assert decide(tool, params, ctx, mode, PermissionMemory()) == "allow"


def test_the_params_models_used_here_are_the_tools_own() -> None:
    assert TOOLS["read_file"].params_model is ReadFileParams
    assert TOOLS["search"].params_model is SearchParams
    assert TOOLS["write_file"].params_model is WriteFileParams
    assert TOOLS["edit_file"].params_model is EditFileParams
    assert TOOLS["shell"].params_model is ShellParams


# --- the session's skills, outside the roots ------------------------------------------------


def skills_context(root: Path) -> tuple[ToolContext, Path]:
    """A session whose one skill lives in the user's home, outside its roots."""
    skill = root.parent / "home" / ".agents" / "skills" / "review"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: review\ndescription: d\n---\nbody\n")
    (root.parent / "home" / "secret.txt").write_text("x")
    ctx = make_context(root, FakeEditor())
    return dataclasses.replace(ctx, readable_elsewhere=(skill,)), skill


@pytest.mark.parametrize("mode", ["ask", "accept-edits", "read-only"])
def test_a_skill_is_read_without_a_question_but_its_neighbours_still_ask(
    root: Path, mode: PermissionMode
) -> None:
    ctx, skill = skills_context(root)

    assert verdict(ctx, mode, "read_file", path=str(skill / "SKILL.md")) == "allow"
    assert verdict(ctx, mode, "search", grep="x", path=str(skill)) == "allow"
    assert (
        verdict(ctx, mode, "read_file", path=str(skill.parent.parent.parent / "secret.txt"))
        == "ask"
    )


def test_writing_into_a_skill_folder_still_asks(root: Path) -> None:
    ctx, skill = skills_context(root)

    assert (
        verdict(ctx, "accept-edits", "write_file", path=str(skill / "SKILL.md"), content="")
        == "ask"
    )
    assert (
        verdict(ctx, "ask", "edit_file", path=str(skill / "SKILL.md"), old_text="b", new_text="c")
        == "ask"
    )


def test_a_symlink_in_a_skill_folder_pointing_out_of_it_asks(root: Path) -> None:
    ctx, skill = skills_context(root)
    (skill / "escape.txt").symlink_to(skill.parent.parent.parent / "secret.txt")

    assert verdict(ctx, "ask", "read_file", path=str(skill / "escape.txt")) == "ask"
