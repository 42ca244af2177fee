"""What a mentioned file or directory gives the model: through the editor or from the disk,
with its path and range, cut at the limit, listed, or a note."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from tool_fakes import FakeEditor, make_context

from acp_agent.messages import DocumentPart, ImagePart, TextPart
from acp_agent.tools import ToolContext
from acp_agent.tools.file_context import MAX_LISTED, LineRange, read_context

pytestmark = pytest.mark.anyio

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def text_of(parts: tuple[TextPart | ImagePart | DocumentPart, ...]) -> str:
    (part,) = parts
    assert isinstance(part, TextPart)
    return part.text


async def test_a_file_is_read_through_the_editor_which_has_the_unsaved_buffer(root: Path) -> None:
    (root / "a.py").write_text("on disk\n")
    editor = FakeEditor({str(root / "a.py"): "in the buffer\n"})
    parts = await read_context(make_context(root, editor), root / "a.py", max_bytes=4096)
    assert text_of(parts) == f'<file path="{root}/a.py">\nin the buffer\n</file>'
    assert editor.calls == [("read", str(root / "a.py"), 1, None)]


async def test_a_line_range_is_asked_of_the_editor_and_named_with_the_text(root: Path) -> None:
    (root / "a.py").write_text("".join(f"line {n}\n" for n in range(1, 31)))
    editor = FakeEditor({str(root / "a.py"): (root / "a.py").read_text()})
    ctx = make_context(root, editor)
    parts = await read_context(ctx, root / "a.py", LineRange(10, 12), max_bytes=4096)
    assert text_of(parts) == (
        f'<file path="{root}/a.py" lines="10-12">\nline 10\nline 11\nline 12\n</file>'
    )
    assert editor.calls == [("read", str(root / "a.py"), 10, 3)]


async def test_a_range_past_the_end_names_the_lines_there_are(local_ctx: ToolContext) -> None:
    path = local_ctx.cwd / "short.txt"
    path.write_text("one\ntwo\nthree")
    parts = await read_context(local_ctx, path, LineRange(2, 40), max_bytes=4096)
    assert text_of(parts) == f'<file path="{path}" lines="2-3">\ntwo\nthree\n</file>'
    parts = await read_context(local_ctx, path, LineRange(9, 9), max_bytes=4096)
    assert "[no lines at or after line 9]" in text_of(parts)


async def test_without_the_editors_files_the_disk_is_read(
    local_ctx: ToolContext, local_editor: FakeEditor
) -> None:
    (local_ctx.cwd / "b.txt").write_text("from disk\r\nsecond\n")
    parts = await read_context(local_ctx, local_ctx.cwd / "b.txt", max_bytes=4096)
    assert text_of(parts) == f'<file path="{local_ctx.cwd}/b.txt">\nfrom disk\r\nsecond\n</file>'
    assert local_editor.calls == []


@pytest.mark.parametrize("through_editor", [True, False])
async def test_a_large_file_is_cut_on_a_line_with_a_note_where_to_read_on(
    root: Path, through_editor: bool
) -> None:
    path = root / "big.log"
    path.write_text("".join(f"entry {n:04d}\n" for n in range(1, 1001)))  # 11 bytes a line
    editor = FakeEditor({str(path): path.read_text()}, can_read_files=through_editor)
    parts = await read_context(make_context(root, editor), path, max_bytes=1100)
    text = text_of(parts)
    assert text.startswith(f'<file path="{path}" lines="1-100">\nentry 0001\n')
    assert "entry 0100\n[cut at 1100 bytes: showing lines 1-100" in text
    assert "read_file with line=101" in text
    assert "entry 0101" not in text
    if through_editor:  # only the lines that can be shown, plus one, are asked for
        assert editor.calls == [("read", str(path), 1, 101)]


async def test_one_line_longer_than_the_limit_is_cut_within_it(local_ctx: ToolContext) -> None:
    path = local_ctx.cwd / "min.js"
    path.write_text("é" * 3000)
    text = text_of(await read_context(local_ctx, path, max_bytes=1025))
    assert "[cut at 1025 bytes within line 1" in text
    assert text.count("é") == 512


async def test_a_missing_file_is_a_note_through_any_editor_or_none(root: Path) -> None:
    # missing_reads_empty: Toad and CodeCompanion answer a missing file with "".
    for editor in (
        FakeEditor(),
        FakeEditor(can_read_files=False),
        FakeEditor(missing_reads_empty=True),
    ):
        parts = await read_context(make_context(root, editor), root / "gone.py", max_bytes=4096)
        assert (
            text_of(parts) == f"[the mentioned file {root}/gone.py was not read: it does not exist]"
        )


async def test_a_file_only_the_editor_has_is_read_from_it(root: Path) -> None:
    editor = FakeEditor({str(root / "new.py"): "not saved yet\n"})
    parts = await read_context(make_context(root, editor), root / "new.py", max_bytes=4096)
    assert "not saved yet" in text_of(parts)


async def test_when_the_editor_refuses_a_file_the_disk_has_it_is_read_from_disk(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside text\n")
    editor = FakeEditor(read_errors={str(outside): "Path is outside allowed cwd subtree"})
    parts = await read_context(make_context(root, editor), outside, max_bytes=4096)
    assert "outside text" in text_of(parts)


async def test_a_binary_file_is_a_note(local_ctx: ToolContext) -> None:
    path = local_ctx.cwd / "blob.bin"
    path.write_bytes(b"\x00\x01\x02binary")
    assert "it is a binary file" in text_of(await read_context(local_ctx, path, max_bytes=4096))


async def test_an_image_is_read_from_disk_as_an_image(root: Path) -> None:
    (root / "dot.png").write_bytes(PNG)
    editor = FakeEditor()
    caption, image = await read_context(make_context(root, editor), root / "dot.png", max_bytes=64)
    assert caption == TextPart(f'<file path="{root}/dot.png" type="image/png"/>')
    assert image == ImagePart(base64.b64encode(PNG).decode(), "image/png")
    assert editor.calls == []  # the editor's files are text


async def test_a_pdf_is_read_as_a_document(local_ctx: ToolContext) -> None:
    path = local_ctx.cwd / "spec.pdf"
    path.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n")
    caption, document = await read_context(local_ctx, path, max_bytes=4096)
    assert isinstance(caption, TextPart) and 'type="application/pdf"' in caption.text
    assert document == DocumentPart(
        base64.b64encode(path.read_bytes()).decode(), "application/pdf", "spec.pdf"
    )


async def test_a_directory_is_listed_with_gitignore_honoured(local_ctx: ToolContext) -> None:
    top = local_ctx.cwd / "proj"
    (top / "src" / "deep").mkdir(parents=True)
    (top / "build").mkdir()
    (top / ".gitignore").write_text("build/\n*.log\n")
    (top / "README.md").write_text("readme\n")
    (top / "debug.log").write_text("noise\n")
    (top / "build" / "out.o").write_text("obj\n")
    (top / "src" / "main.py").write_text("main\n")
    (top / "src" / "deep" / "x.py").write_text("x\n")
    text = text_of(await read_context(local_ctx, top, max_bytes=4096))
    assert text == (
        f'<directory path="{top}">\n'
        ".gitignore\nREADME.md\nsrc/\nsrc/deep/\nsrc/deep/x.py\nsrc/main.py\n"
        "</directory>"
    )


async def test_a_large_directory_lists_its_shallowest_entries_first(
    local_ctx: ToolContext,
) -> None:
    top = local_ctx.cwd / "many"
    (top / "nested").mkdir(parents=True)
    for n in range(MAX_LISTED):
        (top / "nested" / f"f{n:03d}.txt").write_text("")
    (top / "z_top.txt").write_text("")
    text = text_of(await read_context(local_ctx, top, max_bytes=4096))
    assert "\nnested/\n" in text and "\nz_top.txt\n" in text  # depth 1 kept whole
    assert f"[{MAX_LISTED} of {MAX_LISTED + 2} entries shown" in text
