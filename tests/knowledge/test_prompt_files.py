"""Prompt files: which markdown files become slash commands, which win, what the editor is
shown of them, when they changed, and the prompt a command expands to. Real files on disk."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from acp_agent.knowledge.prompt_files import (
    PromptFile,
    PromptFiles,
    discover_prompt_files,
    expand,
    files_stamp,
)


@dataclass(frozen=True)
class Layout:
    """A project root with a nested cwd, and a user config directory; all real paths."""

    root: Path
    cwd: Path
    config: Path

    def discover(self) -> PromptFiles:
        return discover_prompt_files(self.cwd, self.root, user_config_dir=self.config)

    def stamp(self) -> tuple[tuple[str, int, int], ...]:
        return files_stamp(self.cwd, self.root, user_config_dir=self.config)

    @property
    def commands(self) -> Path:
        return self.root / ".agents" / "commands"


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    base = Path(os.path.realpath(tmp_path))
    root = base / "project"
    cwd = root / "services" / "api"
    cwd.mkdir(parents=True)
    return Layout(root=root, cwd=cwd, config=base / "config" / "acp-agent")


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def names(commands: tuple[PromptFile, ...]) -> list[str]:
    return [command.name for command in commands]


def command_named(found: PromptFiles, name: str) -> PromptFile:
    command = found.find(name)
    assert command is not None, names(found.commands)
    return command


def warned_about(found: PromptFiles, path: Path) -> str:
    """The one warning that names `path`."""
    matching = [warning for warning in found.warnings if str(path) in warning]
    assert len(matching) == 1, found.warnings
    return matching[0]


# --- Hostile files first ---------------------------------------------------------------------


def test_a_project_command_linking_outside_the_project_is_skipped(
    layout: Layout, tmp_path: Path
) -> None:
    secret = write(tmp_path / "secrets" / "token.md", "sk-live-123")
    write(layout.commands / "fine.md", "Fine.")
    (layout.commands / "leak.md").symlink_to(secret)
    (layout.commands / "outside").symlink_to(secret.parent, target_is_directory=True)

    found = layout.discover()

    assert names(found.commands) == ["fine"]
    assert "outside the project" in warned_about(found, layout.commands / "leak.md")
    assert "outside the project" in warned_about(found, layout.commands / "outside")
    assert all("sk-live" not in command.body for command in found.commands)


def test_a_commands_directory_linking_outside_the_project_is_skipped(
    layout: Layout, tmp_path: Path
) -> None:
    write(tmp_path / "shared" / "deploy.md", "Deploy.")
    (layout.root / ".claude").mkdir()
    (layout.root / ".claude" / "commands").symlink_to(tmp_path / "shared")

    found = layout.discover()

    assert found.commands == ()
    assert "outside the project" in warned_about(found, layout.root / ".claude" / "commands")


def test_a_user_command_may_link_anywhere(layout: Layout, tmp_path: Path) -> None:
    dotfile = write(tmp_path / "dotfiles" / "standup.md", "Summarise my day.")
    (layout.config / "commands").mkdir(parents=True)
    (layout.config / "commands" / "standup.md").symlink_to(dotfile)

    found = layout.discover()

    assert names(found.commands) == ["standup"]
    assert found.commands[0].body == "Summarise my day."


def test_a_10_mb_prompt_file_is_skipped_and_the_others_kept(layout: Layout) -> None:
    huge = write(layout.commands / "huge.md", b"Do it.\n" * (10 * 1024 * 1024 // 7))
    write(layout.commands / "small.md", "Small.")

    found = layout.discover()

    assert names(found.commands) == ["small"]
    assert "larger than 256 KiB" in warned_about(found, huge)


def test_a_prompt_file_that_is_not_utf8_is_skipped(layout: Layout) -> None:
    latin = write(layout.commands / "latin.md", b"R\xe9sum\xe9 the file.\n")
    late = write(layout.commands / "late.md", b"---\ndescription: ok\n---\nBody \xff\n")
    write(layout.commands / "fine.md", "Fine.")

    found = layout.discover()

    assert names(found.commands) == ["fine"]
    assert "UTF-8" in warned_about(found, latin)
    assert "UTF-8" in warned_about(found, late)


def test_a_folder_symlink_loop_is_walked_once_and_reported(layout: Layout) -> None:
    write(layout.commands / "git" / "commit.md", "Commit.")
    (layout.commands / "git" / "again").symlink_to(layout.commands / "git")
    (layout.commands / "self.md").symlink_to(layout.commands / "self.md")

    found = layout.discover()

    assert names(found.commands) == ["git:commit"]
    assert "loop" in warned_about(found, layout.commands / "git" / "again")
    warned_about(found, layout.commands / "self.md")


def test_a_fifo_named_like_a_prompt_file_is_skipped_without_hanging(layout: Layout) -> None:
    layout.commands.mkdir(parents=True)
    os.mkfifo(layout.commands / "pipe.md")

    found = layout.discover()

    assert found.commands == ()
    assert "not a regular file" in warned_about(found, layout.commands / "pipe.md")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_prompt_file_is_skipped_with_a_warning(layout: Layout) -> None:
    locked = write(layout.commands / "locked.md", "Secret.")
    locked.chmod(0)
    write(layout.commands / "fine.md", "Fine.")

    found = layout.discover()

    assert names(found.commands) == ["fine"]
    warned_about(found, locked)


def test_folders_nested_too_deep_are_not_walked(layout: Layout) -> None:
    write(layout.commands / "a" / "b" / "c" / "d" / "ok.md", "Ok.")
    write(layout.commands / "a" / "b" / "c" / "d" / "e" / "deep.md", "Deep.")

    found = layout.discover()

    assert names(found.commands) == ["a:b:c:d:ok"]
    assert "deep" in warned_about(found, layout.commands / "a" / "b" / "c" / "d" / "e")


def test_bad_front_matter_skips_the_file_with_a_warning(layout: Layout) -> None:
    broken = write(layout.commands / "broken.md", "---\ndescription: x\n  bad: indent: here\n---\n")
    unclosed = write(layout.commands / "unclosed.md", "---\ndescription: never closed\n")
    listed = write(layout.commands / "listed.md", "---\n- a\n---\nBody.\n")
    write(layout.commands / "fine.md", "Fine.")

    found = layout.discover()

    assert names(found.commands) == ["fine"]
    assert "not valid YAML" in warned_about(found, broken)
    assert "never closes" in warned_about(found, unclosed)
    assert "not a mapping" in warned_about(found, listed)


# --- Names -----------------------------------------------------------------------------------


def test_names_come_from_file_names_and_subfolders(layout: Layout) -> None:
    write(layout.commands / "review.md", "Review.")
    write(layout.commands / "git" / "commit.md", "Commit.")
    write(layout.commands / "Fix_Bug-2.MD", "Fix.")
    write(layout.commands / "notes.txt", "Not a command.")
    write(layout.commands / ".draft.md", "Hidden.")
    write(layout.commands / ".hidden" / "x.md", "Hidden.")

    found = layout.discover()

    assert names(found.commands) == ["Fix_Bug-2", "git:commit", "review"]
    assert found.warnings == ()


@pytest.mark.parametrize("file_name", ["my command.md", "-dash.md", "ça.md", "v1.2.md"])
def test_a_file_name_that_is_no_slash_command_word_is_skipped(
    layout: Layout, file_name: str
) -> None:
    bad = write(layout.commands / file_name, "Body.")
    write(layout.commands / "fine.md", "Fine.")

    found = layout.discover()

    assert names(found.commands) == ["fine"]
    assert "not a command name" in warned_about(found, bad)


def test_a_file_name_with_control_characters_is_skipped(layout: Layout) -> None:
    write(layout.commands / "evil\nname.md", "Body.")

    found = layout.discover()

    assert found.commands == ()
    assert "control characters" in found.warnings[0]


# --- What the editor is shown ----------------------------------------------------------------


def test_front_matter_gives_description_and_argument_hint(layout: Layout) -> None:
    path = write(
        layout.commands / "review.md",
        "---\ndescription: Review a pull request\nargument-hint: <pr-number> [focus]\n"
        "model: fast\n---\n\nReview PR $1.\n",
    )

    found = layout.discover()

    assert found.commands == (
        PromptFile(
            "review",
            "Review a pull request",
            "<pr-number> [focus]",
            "Review PR $1.\n",
            path,
            "project",
        ),
    )


@pytest.mark.parametrize(
    ("front_matter", "hint"),
    [
        ("argument-hint: [message]", "[message]"),  # YAML reads a list
        ("argument-hint: [pr-number] [priority]", "[pr-number] [priority]"),  # not YAML at all
        ("argument-hint: ''", None),
    ],
)
def test_argument_hints_are_shown_as_written(
    layout: Layout, front_matter: str, hint: str | None
) -> None:
    write(layout.commands / "c.md", f"---\ndescription: C.\n{front_matter}\n---\nBody.\n")

    found = layout.discover()

    assert found.commands[0].argument_hint == hint
    assert found.warnings == ()


def test_without_front_matter_the_first_line_describes_the_command(layout: Layout) -> None:
    write(layout.commands / "short.md", "\n\n# Explain the code\n\nExplain $ARGUMENTS.\n")
    write(layout.commands / "long.md", "Refactor " + "the module carefully " * 10 + "\nMore.\n")
    write(layout.commands / "empty.md", "")

    found = layout.discover()

    assert command_named(found, "short").description == "Explain the code"
    assert command_named(found, "short").argument_hint is None
    long = command_named(found, "long")
    assert len(long.description) == 80
    assert long.description.startswith("Refactor the module") and long.description.endswith("…")
    assert command_named(found, "empty").description == ""


def test_a_description_that_is_not_text_falls_back_to_the_first_line(layout: Layout) -> None:
    path = write(layout.commands / "c.md", "---\ndescription: [a, b]\n---\nDo the thing.\n")

    found = layout.discover()

    assert found.commands[0].description == "Do the thing."
    assert "not text" in warned_about(found, path)


# --- Which win -------------------------------------------------------------------------------


def test_cwd_beats_root_beats_user_and_agents_beats_claude(layout: Layout) -> None:
    cwd_agents = write(layout.cwd / ".agents" / "commands" / "test.md", "cwd agents")
    cwd_claude = write(layout.cwd / ".claude" / "commands" / "test.md", "cwd claude")
    root_agents = write(layout.commands / "test.md", "root agents")
    user = write(layout.config / "commands" / "test.md", "user")
    write(layout.config / "commands" / "mine.md", "mine")
    write(layout.root / ".claude" / "commands" / "lint.md", "lint")

    found = layout.discover()

    assert names(found.commands) == ["lint", "mine", "test"]
    assert command_named(found, "test").path == cwd_agents
    assert [command.path for command in found.shadowed] == [cwd_claude, root_agents, user]
    assert [command.scope for command in found.shadowed] == ["project", "project", "user"]
    assert command_named(found, "mine").scope == "user"


def test_claude_commands_linked_to_agents_commands_count_once(layout: Layout) -> None:
    write(layout.commands / "review.md", "Review.")
    (layout.root / ".claude").mkdir()
    (layout.root / ".claude" / "commands").symlink_to(layout.commands)

    found = layout.discover()

    assert names(found.commands) == ["review"]
    assert found.shadowed == ()


def test_no_places_means_no_commands_and_no_warnings(layout: Layout) -> None:
    found = discover_prompt_files(layout.cwd, layout.root, user_config_dir=None)

    assert found == PromptFiles((), (), (), ())


# --- Telling when files changed --------------------------------------------------------------


def test_files_stamp_matches_the_stamp_discovery_gives(layout: Layout) -> None:
    write(layout.commands / "a.md", "A.")
    write(layout.commands / "bad name.md", "Skipped, but a fix must be noticed.")
    write(layout.config / "commands" / "git" / "b.md", "B.")

    found = layout.discover()

    assert found.stamp == layout.stamp()
    assert {Path(path).name for path, _, _ in found.stamp} == {"a.md", "bad name.md", "b.md"}


def test_the_stamp_changes_when_a_file_is_edited_added_or_removed(layout: Layout) -> None:
    edited = write(layout.commands / "a.md", "A.")
    before = layout.discover().stamp
    assert layout.stamp() == before

    edited.write_text("A, longer now.", encoding="utf-8")
    after_edit = layout.stamp()
    assert after_edit != before

    added = write(layout.cwd / ".claude" / "commands" / "new.md", "New.")
    after_add = layout.stamp()
    assert after_add != after_edit

    added.unlink()
    assert layout.stamp() == after_edit


def test_a_rewrite_with_the_same_size_is_noticed_by_its_mtime(layout: Layout) -> None:
    path = write(layout.commands / "a.md", "AAAA")
    before = layout.stamp()
    os.utime(path, ns=(0, 1_000_000_000))
    path.write_text("BBBB", encoding="utf-8")

    assert layout.stamp() != before


# --- Expanding a command ---------------------------------------------------------------------


def command(body: str) -> PromptFile:
    return PromptFile("c", "C.", None, body, Path("/p/.agents/commands/c.md"), "project")


@pytest.mark.parametrize(
    ("body", "arguments", "prompt"),
    [
        ("Review $ARGUMENTS carefully.", "src/app.py tests", "Review src/app.py tests carefully."),
        ("Fix issue #$1 with priority $2.", "123 high", "Fix issue #123 with priority high."),
        ("Compare $1 and $2.", '"my file.py" other.py', "Compare my file.py and other.py."),
        ("Compare $1 and $2 ($3).", "one", "Compare one and  ()."),
        ("Say $1.", "don't stop", "Say don't."),  # unbalanced quote: whitespace split
        ("Costs $$5, not $ARGUMENTS.", "much", "Costs $5, not much."),
        ("Keep $$ARGUMENTS and $$1.", "x", "Keep $ARGUMENTS and $1.\n\nx"),  # no placeholder
        ("Keep $ARGUMENTS_LIST and $0.", "", "Keep $ARGUMENTS_LIST and $0."),
        ("All: $ARGUMENTS; first: $1", "  a b  ", "All: a b; first: a"),
        ("$9$1", "1 2 3 4 5 6 7 8 9", "91"),
    ],
)
def test_placeholders_are_filled_in(body: str, arguments: str, prompt: str) -> None:
    assert expand(command(body), arguments) == prompt


def test_arguments_are_appended_after_a_blank_line_when_the_body_has_no_placeholder() -> None:
    assert expand(command("Write tests.\n"), "for the parser") == "Write tests.\n\nfor the parser"
    assert expand(command("Write tests.\n"), "   ") == "Write tests.\n"
    assert expand(command("Costs $$5.\n"), "x") == "Costs $5.\n\nx"
    assert expand(command(""), "just this") == "just this"


def test_expanding_a_discovered_file_uses_its_body_only(layout: Layout) -> None:
    write(layout.commands / "fix.md", "---\ndescription: Fix it\n---\nFix issue $1.\n")

    fix = layout.discover().find("fix")

    assert fix is not None
    assert expand(fix, "42") == "Fix issue 42.\n"
