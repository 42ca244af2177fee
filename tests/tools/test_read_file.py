from __future__ import annotations

from pathlib import Path

import pytest
from tool_fakes import FakeEditor, make_context

from acp_agent.messages import Location, TextPart
from acp_agent.tools import ToolContext, ToolFailed
from acp_agent.tools.read_file import DISPLAY_CHARS, MAX_CHARS, ReadFile, ReadFileParams

pytestmark = pytest.mark.anyio

TOOL = ReadFile()


def numbered(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(1, count + 1))


async def test_a_page_of_an_editor_file_comes_numbered_with_a_notice_how_to_read_on(
    root: Path,
) -> None:
    path = str(root / "a.txt")
    editor = FakeEditor({path: numbered(10)})

    outcome = await TOOL.run(
        ReadFileParams(path="a.txt", line=3, limit=4), make_context(root, editor)
    )

    assert outcome.model_text.splitlines()[:4] == [
        "     3\tline 3",
        "     4\tline 4",
        "     5\tline 5",
        "     6\tline 6",
    ]
    assert "call read_file with line=7 to read further" in outcome.model_text
    assert outcome.locations == (Location(path, 3),)
    # One line more than shown tells whether the file continues.
    assert editor.calls == [("read", path, 3, 5)]


async def test_the_last_page_has_no_continuation_notice(root: Path) -> None:
    path = str(root / "a.txt")
    editor = FakeEditor({path: numbered(5)})

    outcome = await TOOL.run(ReadFileParams(path=path, line=4), make_context(root, editor))

    assert outcome.model_text == "     4\tline 4\n     5\tline 5"


async def test_reading_past_the_end_and_an_empty_file_say_so(root: Path) -> None:
    (root / "a.txt").write_text(numbered(2))
    (root / "empty").write_text("")
    editor = FakeEditor({str(root / "a.txt"): numbered(2), str(root / "empty"): ""})
    ctx = make_context(root, editor)

    past = await TOOL.run(ReadFileParams(path="a.txt", line=9), ctx)
    empty = await TOOL.run(ReadFileParams(path="empty"), ctx)

    assert past.model_text == "[no lines at or after line 9]"
    assert empty.model_text == "[empty file]"


async def test_the_local_fallback_pages_the_same_way(root: Path, local_ctx: ToolContext) -> None:
    (root / "a.txt").write_text(numbered(3000))

    first = await TOOL.run(ReadFileParams(path="a.txt"), local_ctx)
    second = await TOOL.run(ReadFileParams(path="a.txt", line=2001), local_ctx)

    assert first.model_text.splitlines()[-2] == "  2000\tline 2000"
    assert "line=2001" in first.model_text
    assert second.model_text.splitlines()[0] == "  2001\tline 2001"
    assert second.model_text.splitlines()[-1] == "  3000\tline 3000"


async def test_a_missing_local_file_is_an_error_the_model_can_read(local_ctx: ToolContext) -> None:
    with pytest.raises(ToolFailed, match="no such file"):
        await TOOL.run(ReadFileParams(path="nope.txt"), local_ctx)


async def test_only_newlines_end_lines_so_numbers_match_the_editor(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "a.txt").write_text("one\u2028still one\x0cstill one\r\ntwo\rthree\n", newline="")

    outcome = await TOOL.run(ReadFileParams(path="a.txt"), local_ctx)

    assert [line.split("\t")[0].strip() for line in outcome.model_text.split("\n")] == [
        "1",
        "2",
        "3",
    ]


async def test_an_overlong_line_is_cut_with_a_notice(root: Path, local_ctx: ToolContext) -> None:
    (root / "min.js").write_text("x" * (MAX_CHARS + 50) + "\nnext\n")

    outcome = await TOOL.run(ReadFileParams(path="min.js"), local_ctx)

    assert f"longer than {MAX_CHARS} characters were cut" in outcome.model_text
    assert "line=2" in outcome.model_text


# --- what the user sees ----------------------------------------------------------------


async def test_the_finished_read_shows_the_text_read_fenced_under_its_path_and_range(
    root: Path,
) -> None:
    path = str(root / "src" / "a.py")
    editor = FakeEditor({path: numbered(10)})

    outcome = await TOOL.run(
        ReadFileParams(path="src/a.py", line=3, limit=2), make_context(root, editor)
    )

    assert outcome.display == (TextPart("```src/a.py#L3-4\nline 3\nline 4\n```"),)
    assert outcome.raw_output == {
        "path": path,
        "line": 3,
        "lines": 2,
        "bytes": 14,
        "continues": True,
    }


async def test_a_path_a_fence_cannot_name_and_an_empty_file_still_show_something(
    root: Path,
) -> None:
    spaced, empty = str(root / "my notes.txt"), str(root / "empty")
    (root / "empty").write_text("")
    editor = FakeEditor({spaced: "hello\n", empty: ""})
    ctx = make_context(root, editor)

    named = await TOOL.run(ReadFileParams(path="my notes.txt"), ctx)
    nothing = await TOOL.run(ReadFileParams(path="empty"), ctx)

    assert named.display == (TextPart("```\nhello\n```"),)
    assert nothing.display == (TextPart("[empty file]"),)
    assert nothing.raw_output is not None and nothing.raw_output["lines"] == 0


async def test_titles_name_the_project_relative_path_and_say_when_nothing_was_read(
    root: Path, tmp_path: Path
) -> None:
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x = 1\ny = 2\n")
    (root / "empty.txt").write_text("")
    outside = tmp_path / "outside.txt"
    outside.write_text("far\n")
    ctx = make_context(root, FakeEditor(can_read_files=False))

    read = await TOOL.run(ReadFileParams(path="src/a.py"), ctx)
    empty = await TOOL.run(ReadFileParams(path="empty.txt"), ctx)
    past = await TOOL.run(ReadFileParams(path="src/a.py", line=5), ctx)
    far = await TOOL.run(ReadFileParams(path=str(outside)), ctx)

    assert TOOL.title(ReadFileParams(path=str(root / "src/a.py")), ctx) == "Read src/a.py"
    assert read.title == "Read src/a.py (lines 1-2)"
    assert empty.title == "Read empty.txt (empty)"
    assert past.title == "Read src/a.py (nothing after line 4)"
    assert far.title == f"Read {outside} (lines 1-1)"
    assert read.locations == (Location(str(root / "src/a.py"), 1),)  # the editor's: absolute


async def test_a_client_that_answers_a_missing_file_with_empty_content_hears_it_does_not_exist(
    root: Path,
) -> None:
    """Toad and CodeCompanion answer a read of a missing file with "": the disk decides."""
    (root / "empty.txt").write_text("")
    editor = FakeEditor({str(root / "empty.txt"): ""}, missing_reads_empty=True)
    ctx = make_context(root, editor)

    with pytest.raises(ToolFailed, match="the file does not exist"):
        await TOOL.run(ReadFileParams(path="nope.txt"), ctx)
    empty = await TOOL.run(ReadFileParams(path="empty.txt"), ctx)

    assert empty.model_text == "[empty file]"


async def test_a_very_long_read_is_cut_for_the_user_but_not_for_the_model(
    root: Path, local_ctx: ToolContext
) -> None:
    line = "x" * 99
    (root / "big.txt").write_text((line + "\n") * 500)

    outcome = await TOOL.run(ReadFileParams(path="big.txt"), local_ctx)

    [shown] = outcome.display
    assert isinstance(shown, TextPart)
    kept = DISPLAY_CHARS // 100
    assert shown.text.startswith(f"```big.txt#L1-{kept}\n")
    assert shown.text.endswith(f"```\n[{500 - kept} more lines were read; not shown here]")
    assert len(shown.text) < DISPLAY_CHARS + 200
    assert outcome.model_text.count(line) == 500
