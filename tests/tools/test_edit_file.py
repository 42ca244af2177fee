from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from tool_fakes import FakeEditor, make_context

from acp_agent.messages import DiffContent, Location
from acp_agent.tools import ToolContext, ToolFailed
from acp_agent.tools.edit_file import EditFile, EditFileParams

pytestmark = pytest.mark.anyio

TOOL = EditFile()
SOURCE = "def a():\n    return 1\n\n\ndef b():\n    return 1\n\n\ndef c():\n    return 1\n"


def edit(path: str, **kwargs: object) -> EditFileParams:
    return EditFileParams.model_validate({"path": path, **kwargs})


@pytest.fixture
def editor(root: Path) -> FakeEditor:
    return FakeEditor({str(root / "m.py"): SOURCE})


async def test_a_unique_match_is_replaced_and_shown_as_a_diff(
    root: Path, editor: FakeEditor
) -> None:
    path = str(root / "m.py")

    outcome = await TOOL.run(
        edit("m.py", old_text="def b():\n    return 1", new_text="def b():\n    return 2"),
        make_context(root, editor),
    )

    new = SOURCE.replace("def b():\n    return 1", "def b():\n    return 2")
    assert editor.files[path] == new
    assert outcome.display == (DiffContent(path, SOURCE, new),)
    assert outcome.locations == (Location(path, 6),)
    assert outcome.model_text == f"Edited {path} (1 replacement); first change at line 6."


async def test_missing_text_fails_clearly_and_writes_nothing(
    root: Path, editor: FakeEditor
) -> None:
    with pytest.raises(ToolFailed, match="old_text was not found") as failure:
        await TOOL.run(edit("m.py", old_text="def z():", new_text="x"), make_context(root, editor))

    assert "copy the text exactly" in str(failure.value)
    assert editor.writes == []


async def test_a_whitespace_only_mismatch_points_at_the_line_to_copy(
    root: Path, editor: FakeEditor
) -> None:
    with pytest.raises(ToolFailed, match="Line 5 has the same text with different whitespace"):
        await TOOL.run(
            edit("m.py", old_text="def b():\n  return 1", new_text="x"), make_context(root, editor)
        )


async def test_an_ambiguous_match_says_how_many_and_where_and_how_to_fix_it(
    root: Path, editor: FakeEditor
) -> None:
    with pytest.raises(ToolFailed) as failure:
        await TOOL.run(
            edit("m.py", old_text="return 1", new_text="return 2"), make_context(root, editor)
        )

    message = str(failure.value)
    assert "matches 3 places" in message
    assert "(lines 2, 6, 10)" in message
    assert "more surrounding lines" in message
    assert "replace_all" in message
    assert editor.writes == []


async def test_replace_all_changes_every_occurrence(root: Path, editor: FakeEditor) -> None:
    outcome = await TOOL.run(
        edit("m.py", old_text="return 1", new_text="return 2", replace_all=True),
        make_context(root, editor),
    )

    assert editor.files[str(root / "m.py")].count("return 2") == 3
    assert "3 replacements" in outcome.model_text
    assert outcome.locations == (Location(str(root / "m.py"), 2),)


async def test_multiple_edits_apply_in_order_each_to_the_previous_result(
    root: Path, editor: FakeEditor
) -> None:
    outcome = await TOOL.run(
        edit(
            "m.py",
            edits=[
                {"old_text": "def a():", "new_text": "def alpha():"},
                {
                    "old_text": "def alpha():\n    return 1",
                    "new_text": "def alpha():\n    return 0",
                },
                {"old_text": "return 1", "new_text": "return 9", "replace_all": True},
            ],
        ),
        make_context(root, editor),
    )

    text = editor.files[str(root / "m.py")]
    assert text.startswith("def alpha():\n    return 0\n")
    assert text.count("return 9") == 2
    assert "3 edits, 4 replacements" in outcome.model_text
    assert len(editor.writes) == 1


async def test_multiple_edits_are_all_or_nothing(root: Path, editor: FakeEditor) -> None:
    with pytest.raises(ToolFailed) as failure:
        await TOOL.run(
            edit(
                "m.py",
                edits=[
                    {"old_text": "def a():", "new_text": "def alpha():"},
                    {"old_text": "def nothing():", "new_text": "x"},
                ],
            ),
            make_context(root, editor),
        )

    assert str(failure.value).startswith("edit 2 of 2: old_text was not found")
    assert "No edit was applied" in str(failure.value)
    assert editor.writes == []
    assert editor.files[str(root / "m.py")] == SOURCE


@pytest.mark.parametrize(
    "arguments",
    [
        {"old_text": "a"},
        {"new_text": "a"},
        {},
        {"old_text": "a", "new_text": "b", "edits": [{"old_text": "a", "new_text": "b"}]},
        {"edits": []},
        {"old_text": "", "new_text": "b"},
    ],
    ids=["no-new", "no-old", "nothing", "both-forms", "empty-edits", "empty-old"],
)
def test_arguments_must_give_exactly_one_form_of_edit(arguments: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        edit("m.py", **arguments)


async def test_an_edit_that_changes_nothing_is_refused(root: Path, editor: FakeEditor) -> None:
    with pytest.raises(ToolFailed, match="nothing to change"):
        await TOOL.run(edit("m.py", old_text="def a", new_text="def a"), make_context(root, editor))


async def test_a_missing_file_points_to_write_file(root: Path) -> None:
    with pytest.raises(ToolFailed, match="Use write_file"):
        await TOOL.run(
            edit("gone.py", old_text="a", new_text="b"), make_context(root, FakeEditor())
        )


async def test_a_crlf_file_matches_lf_text_and_stays_crlf(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")

    await TOOL.run(edit("w.txt", old_text="one\ntwo\n", new_text="1\n2\n"), local_ctx)

    assert (root / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_the_local_fallback_edits_the_file_on_disk(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "m.py").write_text(SOURCE)

    outcome = await TOOL.run(edit("m.py", old_text="def c():", new_text="def gamma():"), local_ctx)

    assert "def gamma():" in (root / "m.py").read_text()
    assert outcome.locations == (Location(str(root / "m.py"), 9),)


# --- preview: the diff shown before the user decides ---------------------------------------


async def test_the_preview_is_the_diff_the_edit_would_apply_read_through_the_editor(
    root: Path, editor: FakeEditor
) -> None:
    path = str(root / "m.py")
    params = edit("m.py", old_text="def c():\n    return 1", new_text="def c():\n    return 3")

    preview = await TOOL.preview(params, make_context(root, editor))

    new = SOURCE.replace("def c():\n    return 1", "def c():\n    return 3")
    assert preview == (DiffContent(path, SOURCE, new),)
    assert editor.calls == [("read", path, None, None)]
    assert editor.writes == [], "a preview writes nothing"


async def test_the_run_shows_the_file_as_it_is_when_it_changed_after_the_preview(
    root: Path, editor: FakeEditor
) -> None:
    path = str(root / "m.py")
    params = edit("m.py", old_text="def a():", new_text="def first():")
    ctx = make_context(root, editor)
    await TOOL.preview(params, ctx)
    editor.files[path] = "# edited meanwhile\n" + SOURCE

    outcome = await TOOL.run(params, ctx)

    changed = "# edited meanwhile\n" + SOURCE.replace("def a():", "def first():")
    assert outcome.display == (DiffContent(path, "# edited meanwhile\n" + SOURCE, changed),)
    assert editor.files[path] == changed


async def test_a_preview_of_an_edit_that_cannot_apply_fails_as_the_run_would(
    root: Path, editor: FakeEditor
) -> None:
    with pytest.raises(ToolFailed, match="old_text was not found"):
        await TOOL.preview(
            edit("m.py", old_text="nowhere", new_text="x"), make_context(root, editor)
        )
    assert editor.writes == []


async def test_the_local_fallback_previews_from_the_disk(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "m.py").write_text(SOURCE)

    preview = await TOOL.preview(edit("m.py", old_text="def a", new_text="def z"), local_ctx)

    assert preview == (DiffContent(str(root / "m.py"), SOURCE, SOURCE.replace("def a", "def z")),)
    assert (root / "m.py").read_text() == SOURCE


async def test_the_completed_edit_reports_a_small_summary_as_raw_output(
    root: Path, editor: FakeEditor
) -> None:
    outcome = await TOOL.run(
        edit("m.py", old_text="return 1", new_text="return 0", replace_all=True),
        make_context(root, editor),
    )

    assert outcome.raw_output == {
        "path": str(root / "m.py"),
        "edits": 1,
        "replacements": 3,
        "first_changed_line": 2,
    }


async def test_a_missing_file_answered_with_empty_content_points_to_write_file(
    root: Path,
) -> None:
    """Toad and CodeCompanion answer a read of a missing file with ""."""
    editor = FakeEditor(missing_reads_empty=True)
    params = EditFileParams(path="gone.py", old_text="a", new_text="b")

    with pytest.raises(ToolFailed, match=r"no such file\. Use write_file"):
        await TOOL.run(params, make_context(root, editor))

    assert editor.writes == []
