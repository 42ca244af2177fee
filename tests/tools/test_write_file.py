from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from tool_fakes import FakeEditor, make_context

from acp_agent.messages import DiffContent, Location
from acp_agent.tools import ToolContext, ToolFailed
from acp_agent.tools.write_file import WriteFile, WriteFileParams

pytestmark = pytest.mark.anyio

TOOL = WriteFile()


async def test_a_new_file_is_written_through_the_editor_with_a_diff_from_nothing(
    root: Path,
) -> None:
    path = str(root / "new.py")
    editor = FakeEditor()

    outcome = await TOOL.run(
        WriteFileParams(path="new.py", content="a\nb\n"), make_context(root, editor)
    )

    assert editor.files[path] == "a\nb\n"
    assert outcome.display == (DiffContent(path, None, "a\nb\n"),)
    assert outcome.locations == (Location(path, 1),)
    assert outcome.model_text == f"Created {path} (2 lines)."


async def test_overwriting_shows_old_and_new_and_points_at_the_first_change(root: Path) -> None:
    path = str(root / "a.txt")
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    editor = FakeEditor({path: "one\ntwo\nthree\n"})

    outcome = await TOOL.run(
        WriteFileParams(path=path, content="one\ntwo\n3\n"), make_context(root, editor)
    )

    assert outcome.display == (DiffContent(path, "one\ntwo\nthree\n", "one\ntwo\n3\n"),)
    assert outcome.locations == (Location(path, 3),)
    assert "first change at line 3" in outcome.model_text


async def test_the_old_text_is_the_editors_unsaved_buffer_not_the_disk(root: Path) -> None:
    path = str(root / "a.txt")
    (root / "a.txt").write_text("on disk\n")
    editor = FakeEditor({path: "unsaved edit\n"})

    outcome = await TOOL.run(
        WriteFileParams(path=path, content="new\n"), make_context(root, editor)
    )

    assert outcome.display == (DiffContent(path, "unsaved edit\n", "new\n"),)


async def test_a_failed_editor_read_of_an_existing_file_fails_instead_of_overwriting(
    root: Path,
) -> None:
    path = str(root / "locked.txt")
    (root / "locked.txt").write_text("precious\n")
    editor = FakeEditor(read_errors={path: "Permission denied"})

    with pytest.raises(ToolFailed, match="Permission denied"):
        await TOOL.run(WriteFileParams(path=path, content="x"), make_context(root, editor))

    assert editor.writes == []


async def test_outside_the_roots_only_a_not_found_message_means_a_new_file(
    root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    missing, refused = str(elsewhere / "new.txt"), str(elsewhere / "other.txt")
    editor = FakeEditor(
        read_errors={missing: "Resource not found: file", refused: "Path is outside allowed cwd"}
    )
    ctx = make_context(root, editor)

    created = await TOOL.run(WriteFileParams(path=missing, content="x"), ctx)
    with pytest.raises(ToolFailed, match="outside allowed cwd"):
        await TOOL.run(WriteFileParams(path=refused, content="x"), ctx)

    assert created.display == (DiffContent(missing, None, "x"),)
    assert editor.writes == [("write", missing, "x")]


async def test_identical_content_is_not_written_again(root: Path) -> None:
    path = str(root / "a.txt")
    editor = FakeEditor({path: "same\n"})

    outcome = await TOOL.run(
        WriteFileParams(path=path, content="same\n"), make_context(root, editor)
    )

    assert editor.writes == []
    assert "nothing was written" in outcome.model_text


async def test_the_local_fallback_creates_parents_and_reports_the_diff(
    root: Path, local_ctx: ToolContext
) -> None:
    outcome = await TOOL.run(WriteFileParams(path="deep/er/f.txt", content="hi\n"), local_ctx)

    assert (root / "deep/er/f.txt").read_text() == "hi\n"
    assert outcome.display == (DiffContent(str(root / "deep/er/f.txt"), None, "hi\n"),)


async def test_a_local_overwrite_keeps_the_file_mode_and_follows_symlinks(
    root: Path, local_ctx: ToolContext
) -> None:
    target = root / "script.sh"
    target.write_text("old\n")
    target.chmod(0o755)
    (root / "link.sh").symlink_to(target)

    outcome = await TOOL.run(WriteFileParams(path="link.sh", content="new\n"), local_ctx)

    assert (root / "link.sh").is_symlink()
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert outcome.display == (DiffContent(str(root / "link.sh"), "old\n", "new\n"),)
    assert not any(name.endswith(".tmp") for name in os.listdir(root))


async def test_a_new_local_file_gets_the_umask_mode(root: Path, local_ctx: ToolContext) -> None:
    umask = os.umask(0o022)
    try:
        await TOOL.run(WriteFileParams(path="f.txt", content=""), local_ctx)
    finally:
        os.umask(umask)

    assert stat.S_IMODE((root / "f.txt").stat().st_mode) == 0o644


async def test_a_local_file_in_another_encoding_is_not_overwritten_blindly(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))

    with pytest.raises(ToolFailed, match="not UTF-8"):
        await TOOL.run(WriteFileParams(path="latin1.txt", content="x"), local_ctx)

    assert (root / "latin1.txt").read_bytes() == b"caf\xe9\n"


# --- preview: the diff shown before the user decides ---------------------------------------


async def test_the_preview_of_a_new_file_is_a_diff_from_nothing_and_writes_nothing(
    root: Path,
) -> None:
    path = str(root / "new.py")
    editor = FakeEditor()

    preview = await TOOL.preview(
        WriteFileParams(path="new.py", content="a\n"), make_context(root, editor)
    )

    assert preview == (DiffContent(path, None, "a\n"),)
    assert editor.calls == [("read", path, None, None)]
    assert editor.writes == []


async def test_the_preview_of_an_overwrite_shows_the_editors_buffer_as_old_text(
    root: Path,
) -> None:
    path = str(root / "a.txt")
    (root / "a.txt").write_text("on disk\n")
    editor = FakeEditor({path: "unsaved edit\n"})

    preview = await TOOL.preview(
        WriteFileParams(path=path, content="new\n"), make_context(root, editor)
    )

    assert preview == (DiffContent(path, "unsaved edit\n", "new\n"),)
    assert (root / "a.txt").read_text() == "on disk\n"


async def test_the_local_preview_of_a_new_file_creates_nothing(
    root: Path, local_ctx: ToolContext
) -> None:
    preview = await TOOL.preview(WriteFileParams(path="deep/f.txt", content="hi\n"), local_ctx)

    assert preview == (DiffContent(str(root / "deep/f.txt"), None, "hi\n"),)
    assert not (root / "deep").exists()


async def test_the_completed_write_reports_a_small_summary_as_raw_output(root: Path) -> None:
    path = str(root / "a.txt")
    editor = FakeEditor({path: "old\n"})
    ctx = make_context(root, editor)

    created = await TOOL.run(WriteFileParams(path="b.txt", content="héllo\n"), ctx)
    overwritten = await TOOL.run(WriteFileParams(path=path, content="x\ny\n"), ctx)

    assert created.raw_output == {
        "path": str(root / "b.txt"),
        "created": True,
        "changed": True,
        "lines": 1,
        "bytes": 7,
    }
    assert overwritten.raw_output is not None
    assert (overwritten.raw_output["created"], overwritten.raw_output["lines"]) == (False, 2)


async def test_a_new_file_is_created_when_the_client_answers_its_read_with_empty_content(
    root: Path,
) -> None:
    """Toad and CodeCompanion answer a read of a missing file with "": not an overwrite."""
    path = str(root / "new.py")
    editor = FakeEditor(missing_reads_empty=True)
    ctx = make_context(root, editor)
    params = WriteFileParams(path="new.py", content="a\n")

    preview = await TOOL.preview(params, ctx)
    outcome = await TOOL.run(params, ctx)

    assert preview == (DiffContent(path, None, "a\n"),)
    assert outcome.display == (DiffContent(path, None, "a\n"),)
    assert outcome.raw_output is not None and outcome.raw_output["created"] is True
    assert outcome.model_text == f"Created {path} (1 line)."


async def test_an_existing_empty_file_stays_an_overwrite_with_such_a_client(root: Path) -> None:
    path = str(root / "empty.txt")
    (root / "empty.txt").write_text("")
    editor = FakeEditor({path: ""}, missing_reads_empty=True)

    outcome = await TOOL.run(
        WriteFileParams(path=path, content="now\n"), make_context(root, editor)
    )

    assert outcome.display == (DiffContent(path, "", "now\n"),)
    assert outcome.raw_output is not None and outcome.raw_output["created"] is False


def test_the_title_names_the_path_inside_the_project_relative_to_it(
    root: Path, tmp_path: Path
) -> None:
    ctx = make_context(root, FakeEditor())

    assert TOOL.title(WriteFileParams(path=str(root / "a/b.py"), content=""), ctx) == (
        "Write a/b.py"
    )
    elsewhere = tmp_path / "x.py"
    assert TOOL.title(WriteFileParams(path=str(elsewhere), content=""), ctx) == (
        f"Write {elsewhere}"
    )
