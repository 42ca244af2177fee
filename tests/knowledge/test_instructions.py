"""Instruction files (AGENTS.md and friends) found, read, budgeted and re-read on real files."""

from __future__ import annotations

import logging
import os
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from acp_agent.knowledge.instructions import (
    InstructionFile,
    InstructionReader,
    InstructionSettings,
    project_root,
    render_instructions,
)

LOGGER = "acp_agent.knowledge.instructions"

_opens: list[str] | None = None


def _record_opens(event: str, args: tuple[Any, ...]) -> None:
    if _opens is not None and event == "open":
        _opens.append(os.fsdecode(args[0]) if isinstance(args[0], str | bytes) else "<fd>")


sys.addaudithook(_record_opens)  # audit hooks cannot be removed: it records only when asked


@contextmanager
def files_opened() -> Iterator[list[str]]:
    global _opens
    _opens = []
    try:
        yield _opens
    finally:
        _opens = None


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def project(tmp_path: Path) -> Path:
    """A repository `repo/` (with `.git/`) whose cwd is `repo/a/b`."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "a" / "b").mkdir(parents=True)
    return root


def reader(budget: int = 32 * 1024, **settings: Any) -> InstructionReader:
    return InstructionReader(InstructionSettings(budget_bytes=budget, **settings), None)


def texts(files: list[InstructionFile]) -> list[str]:
    return [file.text for file in files]


# Hostile input first.


def test_a_symlink_leading_out_of_the_project_is_not_read_and_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = project(tmp_path)
    secret = write(tmp_path / "elsewhere" / "secret.md", "the deploy key is hunter2\n")
    (root / "AGENTS.md").symlink_to(secret)
    write(root / "CLAUDE.md", "claude rules\n")
    write(root / "a" / "b" / "AGENTS.md", "near rules\n")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        files = reader().read(root / "a" / "b")

    assert texts(files) == ["claude rules\n", "near rules\n"]
    assert not any("hunter2" in file.text for file in files)
    assert f"{root / 'AGENTS.md'} skipped" in caplog.text
    assert str(secret) in caplog.text


def test_a_symlink_to_a_file_inside_the_project_is_followed(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / "docs" / "agents.md", "shared rules\n")
    (root / "AGENTS.md").symlink_to(root / "docs" / "agents.md")

    files = reader().read(root / "a" / "b")

    assert [(file.path, file.text) for file in files] == [(root / "AGENTS.md", "shared rules\n")]


def test_a_10_mb_file_is_cut_at_a_line_to_the_budget_without_being_read_whole(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    line = "x" * 99 + "\n"
    write(root / "AGENTS.md", line * 100_000)  # 10 MB

    tracemalloc.start()
    try:
        files = reader(budget=32 * 1024).read(root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    (file,) = files
    assert file.cut and file.size == 10_000_000
    assert len(file.text.encode()) <= 32 * 1024
    assert file.text == line * (32 * 1024 // 100)  # whole lines only
    assert peak < 1_000_000  # a read of the whole file would take 10 MB


def test_invalid_utf8_is_replaced_and_reported_and_the_rest_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = project(tmp_path)
    (root / "AGENTS.md").write_bytes(b"use tabs\n\xff\xfe broken\nrun make test\n")
    write(root / "a" / "b" / "AGENTS.md", "near rules\n")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        files = reader().read(root / "a" / "b")

    assert texts(files) == ["use tabs\n\ufffd\ufffd broken\nrun make test\n", "near rules\n"]
    assert "not valid UTF-8" in caplog.text


def test_a_symlink_loop_is_skipped_and_claude_md_stands_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = project(tmp_path)
    (root / "AGENTS.md").symlink_to(root / "AGENTS.md")
    write(root / "CLAUDE.md", "claude rules\n")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        files = reader().read(root)

    assert texts(files) == ["claude rules\n"]
    assert f"{root / 'AGENTS.md'} skipped" in caplog.text


def test_a_fifo_named_agents_md_does_not_block_the_turn(tmp_path: Path) -> None:
    root = project(tmp_path)
    os.mkfifo(root / "AGENTS.md")
    write(root / "GEMINI.md", "gemini rules\n")
    result: list[list[InstructionFile]] = []

    worker = threading.Thread(target=lambda: result.append(reader().read(root)), daemon=True)
    worker.start()
    worker.join(timeout=5)

    assert not worker.is_alive(), "reading a FIFO blocked"
    assert texts(result[0]) == ["gemini rules\n"]


def test_a_directory_named_agents_md_lets_claude_md_stand_in(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "AGENTS.md").mkdir()
    write(root / "CLAUDE.md", "claude rules\n")

    assert texts(reader().read(root)) == ["claude rules\n"]


def test_an_unreadable_file_is_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "private\n").chmod(0)
    if os.access(root / "AGENTS.md", os.R_OK):
        pytest.skip("this user reads files whatever their mode (root)")
    write(root / "a" / "AGENTS.md", "readable\n")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        files = reader().read(root / "a")

    assert texts(files) == ["readable\n"]
    assert "permission denied" in caplog.text


def test_a_broken_file_is_reported_once_while_it_stays_broken(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = project(tmp_path)
    (root / "AGENTS.md").symlink_to(root / "AGENTS.md")
    instructions = reader()

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            instructions.read(root)
        assert caplog.text.count("skipped") == 1
        (root / "AGENTS.md").unlink()
        write(root / "AGENTS.md", "fixed\n")
        assert texts(instructions.read(root)) == ["fixed\n"]
        (root / "AGENTS.md").unlink()
        (root / "AGENTS.md").symlink_to(root / "AGENTS.md")
        instructions.read(root)

    assert caplog.text.count("skipped") == 2  # broken again: said again


def test_extra_names_that_leave_their_folder_are_ignored(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(tmp_path / "outside.md", "outside\n")
    write(root / "a" / "AGENTS.md", "rules\n")

    files = reader(extra_names=("../outside.md", str(tmp_path / "outside.md"), "")).read(root / "a")

    assert texts(files) == ["rules\n"]


def test_an_additional_root_that_is_a_symlink_loop_or_missing_costs_nothing_else(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "rules\n")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)

    files = reader().read(root, [loop, tmp_path / "missing"])

    assert texts(files) == ["rules\n"]


def test_a_missing_cwd_gives_no_files(tmp_path: Path) -> None:
    assert reader().read(tmp_path / "gone" / "away") == []


# Where the files are found.


def test_the_project_root_is_the_nearest_folder_with_git(tmp_path: Path) -> None:
    outer = project(tmp_path)
    worktree = outer / "a"
    (worktree / ".git").write_text("gitdir: ../.git/worktrees/a\n")  # a worktree's .git file

    assert project_root(outer / "a" / "b") == worktree
    assert project_root(outer) == outer
    assert project_root(tmp_path / "plain") == tmp_path / "plain"  # none above: the cwd


def test_files_come_far_to_near_user_then_additional_then_project_root_down_to_cwd(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    user_dir = tmp_path / "config" / "acp-agent"
    write(user_dir / "AGENTS.md", "user\n")
    write(tmp_path / "AGENTS.md", "above the project root\n")
    write(root / "AGENTS.md", "root\n")
    write(root / "a" / "b" / "AGENTS.md", "cwd\n")
    write(root / "a" / "sibling" / "AGENTS.md", "not on the way\n")
    lib = tmp_path / "lib"
    write(lib / "AGENTS.md", "lib\n")
    write(lib / "sub" / "AGENTS.md", "below lib\n")

    files = InstructionReader(InstructionSettings(), user_dir).read(root / "a" / "b", [lib])

    assert [(file.path, file.text, file.scope) for file in files] == [
        (user_dir / "AGENTS.md", "user\n", "user"),
        (lib / "AGENTS.md", "lib\n", "additional"),
        (root / "AGENTS.md", "root\n", "project"),
        (root / "a" / "b" / "AGENTS.md", "cwd\n", "project"),
    ]
    assert all(not file.cut for file in files)


def test_without_git_only_the_cwd_is_read(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "parent\n")
    write(tmp_path / "work" / "AGENTS.md", "cwd\n")

    assert texts(reader().read(tmp_path / "work")) == ["cwd\n"]


def test_claude_md_stands_in_for_agents_md_then_gemini_md(tmp_path: Path) -> None:
    root = project(tmp_path)
    for name in ("AGENTS.md", "CLAUDE.md", "GEMINI.md"):
        write(root / name, f"root {name}\n")
    for name in ("CLAUDE.md", "GEMINI.md"):
        write(root / "a" / name, f"a {name}\n")
    write(root / "a" / "b" / "GEMINI.md", "b GEMINI.md\n")

    files = reader().read(root / "a" / "b")

    assert texts(files) == ["root AGENTS.md\n", "a CLAUDE.md\n", "b GEMINI.md\n"]


def test_extra_names_are_read_in_every_folder_before_its_agents_md(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / ".rules", "root .rules\n")
    write(root / "AGENTS.md", "root AGENTS.md\n")
    write(root / "a" / "CONVENTIONS.md", "a CONVENTIONS.md\n")
    write(root / "a" / "b" / ".github" / "copilot-instructions.md", "b copilot\n")

    files = reader(
        extra_names=(".rules", "CONVENTIONS.md", ".github/copilot-instructions.md")
    ).read(root / "a" / "b")

    assert texts(files) == [
        "root .rules\n",
        "root AGENTS.md\n",
        "a CONVENTIONS.md\n",
        "b copilot\n",
    ]


def test_a_file_reached_twice_is_given_once_at_its_nearest_place(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "root\n")
    (root / "CLAUDE.md").symlink_to("AGENTS.md")  # the usual way to serve both tools
    write(root / "a" / "AGENTS.md", "a\n")

    files = reader(extra_names=("CLAUDE.md",)).read(root / "a", [root, root / "a"])

    assert [(file.path, file.scope) for file in files] == [
        (root / "AGENTS.md", "project"),
        (root / "a" / "AGENTS.md", "project"),
    ]


def test_a_users_file_linked_into_a_dotfiles_checkout_is_read(tmp_path: Path) -> None:
    """The user's own file is theirs to keep anywhere; a project's file is not."""
    user_dir = tmp_path / "config" / "acp-agent"
    user_dir.mkdir(parents=True)
    (user_dir / "AGENTS.md").symlink_to(write(tmp_path / "dotfiles" / "AGENTS.md", "mine\n"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "AGENTS.md").symlink_to(tmp_path / "dotfiles" / "AGENTS.md")

    files = InstructionReader(InstructionSettings(), user_dir).read(work)

    assert [(file.path, file.scope, file.text) for file in files] == [
        (user_dir / "AGENTS.md", "user", "mine\n")
    ]


def test_an_additional_root_may_link_into_the_project(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / "shared.md", "shared\n")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "AGENTS.md").symlink_to(root / "shared.md")

    files = reader().read(root, [lib])

    assert [(file.path, file.scope) for file in files] == [(lib / "AGENTS.md", "additional")]


def test_turned_off_nothing_is_read(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "rules\n")

    assert reader(enabled=False).read(root) == []


def test_a_blank_agents_md_is_not_shown_and_keeps_claude_md_out(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "\n  \n")
    write(root / "CLAUDE.md", "claude rules\n")

    assert reader().read(root) == []


def test_a_byte_order_mark_is_not_given_to_the_model(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "AGENTS.md").write_bytes(b"\xef\xbb\xbfuse tabs\n")

    assert texts(reader().read(root)) == ["use tabs\n"]


# The budget.


def test_the_nearest_files_are_kept_whole_and_farther_ones_cut_then_left_out(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "far\n" * 10)  # 40 bytes
    write(root / "a" / "AGENTS.md", "middle line\n" * 5)  # 60 bytes
    write(root / "a" / "b" / "AGENTS.md", "near\n" * 10)  # 50 bytes

    files = reader(budget=80).read(root / "a" / "b")

    assert [(file.text, file.size, file.cut) for file in files] == [
        ("", 40, True),
        ("middle line\n" * 2, 60, True),  # 30 bytes were left: two whole lines fit
        ("near\n" * 10, 50, False),
    ]
    section = render_instructions(files)
    assert f'<instructions path="{root / "AGENTS.md"}">' in section
    assert "not included: over the instruction budget" in section
    assert "36 of 60 bytes left out; read the rest with read_file" in section


def test_a_line_too_long_for_the_budget_is_cut_between_characters(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "日本語" * 100)  # 3 bytes a character, no line break

    (file,) = reader(budget=100).read(root)

    assert file.cut and file.text == "日本語" * 11  # 99 bytes: never half a character


def test_a_zero_budget_leaves_every_file_out_but_names_it(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "rules\n")

    files = reader(budget=0).read(root)

    assert [(file.text, file.cut) for file in files] == [("", True)]
    assert str(root / "AGENTS.md") in render_instructions(files)


# Re-reading between turns.


def test_a_changed_a_new_and_a_deleted_file_are_noticed_on_the_next_read(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "first\n")
    write(root / "a" / "AGENTS.md", "goes away\n")
    instructions = reader()
    assert texts(instructions.read(root / "a" / "b")) == ["first\n", "goes away\n"]

    write(root / "AGENTS.md", "second, longer\n")
    (root / "a" / "AGENTS.md").unlink()
    write(root / "a" / "b" / "CLAUDE.md", "appeared\n")

    assert texts(instructions.read(root / "a" / "b")) == ["second, longer\n", "appeared\n"]


def test_a_rewrite_of_the_same_size_is_noticed(tmp_path: Path) -> None:
    root = project(tmp_path)
    path = write(root / "AGENTS.md", "use tabs\n")
    instructions = reader()
    instructions.read(root)

    path.write_text("use tab!\n")

    assert texts(instructions.read(root)) == ["use tab!\n"]


def test_a_re_read_with_nothing_changed_opens_no_file(tmp_path: Path) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "root\n")
    write(root / "a" / "b" / "AGENTS.md", "cwd\n")
    instructions = reader()
    first = instructions.read(root / "a" / "b")

    with files_opened() as opened:
        again = instructions.read(root / "a" / "b")

    assert again == first
    assert opened == []


def test_a_file_outside_the_roots_is_read_once_an_additional_root_holds_it(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    lib = tmp_path / "lib"
    (root / "AGENTS.md").symlink_to(write(lib / "rules.md", "lib rules\n"))
    instructions = reader()

    assert instructions.read(root) == []
    assert texts(instructions.read(root, [lib])) == ["lib rules\n"]
    assert instructions.read(root) == []


# The prompt section.


def test_no_files_render_nothing() -> None:
    assert render_instructions([]) == ""


def test_the_section_says_nearer_files_win_and_labels_each_file_with_its_path(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    write(root / "AGENTS.md", "use tabs\n")
    write(root / "a" / "AGENTS.md", "use spaces\n")

    section = render_instructions(reader().read(root / "a"))

    assert "nearer the working directory" in section and "precedence" in section
    assert section.index(str(root / "AGENTS.md")) < section.index("use tabs")
    assert section.index("use tabs") < section.index(str(root / "a" / "AGENTS.md"))
    assert section.index(str(root / "a" / "AGENTS.md")) < section.index("use spaces")
    assert "left out" not in section
