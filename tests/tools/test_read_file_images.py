"""`read_file` on an image: recognised by its bytes, sent to the model as the image itself,
scaled down to what every vendor takes, refused clearly when broken or too large."""

from __future__ import annotations

import base64
import io
import os
import re
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import anyio
import pytest
from PIL import Image
from tool_fakes import FakeEditor, make_context

from acp_agent.messages import ImagePart, Location, Message, TextPart, ToolResultPart
from acp_agent.sessions.records import MessageRecord, decode, encode
from acp_agent.tools import PermissionMemory, ToolContext, ToolFailed, decide
from acp_agent.tools._images import MAX_LONG_SIDE, MAX_SENT_BYTES, sniff
from acp_agent.tools.read_file import ReadFile, ReadFileParams

pytestmark = pytest.mark.anyio

TOOL = ReadFile()
FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}


def image_bytes(mime_type: str, size: tuple[int, int] = (64, 48), **options: object) -> bytes:
    """A gradient (so that it compresses like a picture, not like a flat colour)."""
    width, height = size
    gradient = Image.linear_gradient("L").resize(size)
    picture = Image.merge("RGB", (gradient, gradient.rotate(90).resize(size), gradient))
    out = io.BytesIO()
    picture.save(out, FORMATS[mime_type], **options)
    assert picture.size == (width, height)
    return out.getvalue()


def sent(outcome_parts: tuple[TextPart | ImagePart, ...]) -> tuple[str, ImagePart]:
    text, image = outcome_parts
    assert isinstance(text, TextPart) and isinstance(image, ImagePart)
    return text.text, image


def decoded(image: ImagePart) -> Image.Image:
    picture = Image.open(io.BytesIO(base64.b64decode(image.data)))
    picture.load()
    return picture


async def read(ctx: ToolContext, path: str) -> tuple[str, ImagePart]:
    outcome = await TOOL.run(ReadFileParams(path=path), ctx)
    return sent(outcome.model_parts)


# --- what is an image -------------------------------------------------------------------------


@pytest.mark.parametrize("mime_type", sorted(FORMATS))
async def test_each_image_type_reaches_the_model_as_an_image_of_that_type_unchanged(
    root: Path, local_ctx: ToolContext, mime_type: str
) -> None:
    data = image_bytes(mime_type)
    (root / "picture").write_bytes(data)

    outcome = await TOOL.run(ReadFileParams(path="picture"), local_ctx)

    text, image = sent(outcome.model_parts)
    assert image.mime_type == mime_type
    assert base64.b64decode(image.data) == data, "a small image is sent as the file holds it"
    assert re.fullmatch(rf"Image {re.escape(str(root))}/picture: {mime_type} 64x48, \d+ KB", text)
    assert outcome.model_text == text
    assert outcome.display == (TextPart(text),)
    assert outcome.locations == (Location(str(root / "picture")),)
    assert outcome.raw_output is not None
    assert outcome.raw_output["mime_type"] == mime_type
    assert (outcome.raw_output["width"], outcome.raw_output["height"]) == (64, 48)


async def test_the_bytes_decide_not_the_name(root: Path, local_ctx: ToolContext) -> None:
    """A `.txt` holding a PNG is an image; a `.png` holding text is text."""
    (root / "notes.txt").write_bytes(image_bytes("image/png"))
    (root / "logo.png").write_text("not really\na picture\n")

    _, image = await read(local_ctx, "notes.txt")
    text = await TOOL.run(ReadFileParams(path="logo.png"), local_ctx)

    assert image.mime_type == "image/png"
    assert text.model_parts == ()
    assert text.model_text == "     1\tnot really\n     2\ta picture"


def test_sniffing_knows_the_four_signatures_and_nothing_else() -> None:
    assert sniff(b"\x89PNG\r\n\x1a\n\0\0") == "image/png"
    assert sniff(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert sniff(b"GIF87a..") == sniff(b"GIF89a..") == "image/gif"
    assert sniff(b"RIFF\x10\0\0\0WEBPVP8 ") == "image/webp"
    assert sniff(b"RIFF\x10\0\0\0WAVEfmt ") is None  # a RIFF that is sound
    assert sniff(b"\x89PNG") is None  # a signature cut short
    assert sniff(b"GIF88a") is None
    assert sniff(b"") is None


async def test_an_image_is_read_from_disk_even_when_the_editor_serves_files(root: Path) -> None:
    """The editor's fs reads text only; text files still go through it (unsaved buffers)."""
    (root / "shot.png").write_bytes(image_bytes("image/png"))
    (root / "fake.png").write_text("on disk\n")
    editor = FakeEditor({str(root / "fake.png"): "in the buffer\n"})
    ctx = make_context(root, editor)

    _, image = await read(ctx, "shot.png")
    text = await TOOL.run(ReadFileParams(path="fake.png"), ctx)

    assert image.mime_type == "image/png"
    assert text.model_text == "     1\tin the buffer"
    assert [call[1] for call in editor.calls] == [str(root / "fake.png")]


async def test_a_file_only_the_editor_has_is_read_through_the_editor(root: Path) -> None:
    path = str(root / "unsaved.png")
    editor = FakeEditor({path: "a new buffer\n"})

    outcome = await TOOL.run(ReadFileParams(path=path), make_context(root, editor))

    assert outcome.model_text == "     1\ta new buffer"


async def test_a_fifo_named_like_an_image_does_not_hang_the_read(root: Path) -> None:
    fifo = root / "pipe.png"
    os.mkfifo(fifo)
    editor = FakeEditor({str(fifo): "what the editor says\n"})

    with anyio.fail_after(5):
        outcome = await TOOL.run(ReadFileParams(path="pipe.png"), make_context(root, editor))

    assert outcome.model_text == "     1\twhat the editor says"


async def test_a_missing_file_is_the_same_error_as_before(local_ctx: ToolContext) -> None:
    with pytest.raises(ToolFailed, match=r"missing\.png"):
        await TOOL.run(ReadFileParams(path="missing.png"), local_ctx)


# --- scaling ------------------------------------------------------------------------------------


async def test_a_4000x3000_photo_is_scaled_to_1568x1176_and_stays_jpeg(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "photo.jpg").write_bytes(image_bytes("image/jpeg", (4000, 3000), quality=95))

    outcome = await TOOL.run(ReadFileParams(path="photo.jpg"), local_ctx)

    text, image = sent(outcome.model_parts)
    picture = decoded(image)
    assert (image.mime_type, picture.format, picture.size) == ("image/jpeg", "JPEG", (1568, 1176))
    assert text.startswith(
        f"Image {root / 'photo.jpg'}: image/jpeg 4000x3000 scaled to 1568x1176, "
    )
    assert text.endswith(" KB")
    assert outcome.raw_output is not None and outcome.raw_output["scaled"] is True


async def test_a_large_png_stays_png_at_the_longest_side_allowed(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "diagram.png").write_bytes(image_bytes("image/png", (3000, 4000)))

    text, image = await read(local_ctx, "diagram.png")

    picture = decoded(image)
    assert (image.mime_type, picture.size) == ("image/png", (1176, 1568))
    assert "image/png 3000x4000 scaled to 1176x1568, " in text


async def test_a_phone_photo_taken_upright_is_scaled_upright(
    root: Path, local_ctx: ToolContext
) -> None:
    """Stored 4032x3024 with EXIF orientation 6 (turn a quarter): shown, and sent, upright."""
    exif = Image.Exif()
    exif[0x0112] = 6
    (root / "IMG_0001.JPG").write_bytes(
        image_bytes("image/jpeg", (4032, 3024), exif=exif.tobytes())
    )

    text, image = await read(local_ctx, "IMG_0001.JPG")

    assert decoded(image).size == (1176, 1568)
    assert "image/jpeg 3024x4032 scaled to 1176x1568, " in text


async def test_a_png_too_large_in_bytes_is_sent_as_jpeg_of_the_same_size(
    root: Path, local_ctx: ToolContext
) -> None:
    """Noise does not compress: 1500x1500 of it is about 6.7 MB as PNG, over what Anthropic
    takes once in base64."""
    noise = Image.frombytes("RGB", (1500, 1500), os.urandom(1500 * 1500 * 3))
    noise.save(root / "noise.png")
    assert (root / "noise.png").stat().st_size > MAX_SENT_BYTES

    text, image = await read(local_ctx, "noise.png")

    picture = decoded(image)
    assert (image.mime_type, picture.format, picture.size) == ("image/jpeg", "JPEG", (1500, 1500))
    assert len(base64.b64decode(image.data)) <= MAX_SENT_BYTES
    assert len(image.data) <= 5 * 1024 * 1024, "Anthropic's limit applies to the base64 text"
    assert "image/png 1500x1500, 6." in text and "re-encoded as image/jpeg" in text


async def test_a_large_gif_becomes_its_first_frame_as_png(
    root: Path, local_ctx: ToolContext
) -> None:
    frames = [Image.new("RGB", (2000, 1000), colour) for colour in ("red", "blue")]
    frames[0].save(root / "anim.gif", save_all=True, append_images=frames[1:], duration=100)

    text, image = await read(local_ctx, "anim.gif")

    picture = decoded(image).convert("RGB")
    assert (image.mime_type, picture.size) == ("image/png", (MAX_LONG_SIDE, 784))
    assert picture.getpixel((10, 10)) == (255, 0, 0)
    assert "image/gif 2000x1000 scaled to 1568x784 as image/png, " in text


async def test_a_transparent_webp_scaled_keeps_its_transparency(
    root: Path, local_ctx: ToolContext
) -> None:
    clear = Image.new("RGBA", (2000, 2000), (0, 128, 0, 0))
    clear.save(root / "sticker.webp", "WEBP", lossless=True)

    _, image = await read(local_ctx, "sticker.webp")

    picture = decoded(image)
    assert (image.mime_type, picture.mode, picture.size) == ("image/png", "RGBA", (1568, 1568))
    assert picture.getpixel((5, 5))[3] == 0  # type: ignore[index]


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(lambda good: good[: len(good) // 2], id="truncated"),
        pytest.param(lambda good: good[:16] + b"\0" * 64, id="header-then-zeros"),
        pytest.param(lambda good: good[:8], id="signature-only"),
    ],
)
async def test_a_broken_png_is_a_clear_tool_error(
    root: Path, local_ctx: ToolContext, body: object
) -> None:
    good = image_bytes("image/png", (300, 200))
    (root / "broken.png").write_bytes(body(good))  # type: ignore[operator]

    with pytest.raises(ToolFailed) as failure:
        await TOOL.run(ReadFileParams(path="broken.png"), local_ctx)

    message = str(failure.value)
    assert f"{root / 'broken.png'} starts like a PNG image but could not be decoded (" in message
    assert "truncated or damaged" in message


async def test_a_broken_jpeg_is_a_clear_tool_error(root: Path, local_ctx: ToolContext) -> None:
    (root / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"garbage" * 100)

    with pytest.raises(ToolFailed, match="starts like a JPEG image but could not be decoded"):
        await TOOL.run(ReadFileParams(path="broken.jpg"), local_ctx)


async def test_an_image_file_over_50_mb_is_refused_without_reading_it(
    root: Path, local_ctx: ToolContext
) -> None:
    huge = root / "huge.png"
    with huge.open("wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n")
        handle.truncate(51 * 1024 * 1024)  # sparse: nothing to read but the signature

    began = time.monotonic()
    with pytest.raises(ToolFailed) as failure:
        await TOOL.run(ReadFileParams(path="huge.png"), local_ctx)

    assert time.monotonic() - began < 1.0
    assert str(failure.value) == (
        f"{huge} is a PNG image of 51.0 MB; images over 50.0 MB are not read. Make a "
        "smaller copy first (e.g. with a shell command) and read that."
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def decompression_bomb(side: int) -> bytes:
    """A valid one-bit PNG of side x side pixels, all black: tens of KB that would decode to
    side² bytes and more."""
    row = b"\0" + b"\0" * ((side + 7) // 8)
    squeeze = zlib.compressobj(9)
    whole, rest = divmod(side, 1000)
    body = b"".join(squeeze.compress(row * 1000) for _ in range(whole))
    body += squeeze.compress(row * rest)
    body += squeeze.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", body)
        + _png_chunk(b"IEND", b"")
    )


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize("side", [9_500, 20_000])  # beyond our limit; beyond Pillow's too
async def test_a_decompression_bomb_is_refused_without_decoding_it(
    root: Path, local_ctx: ToolContext, side: int
) -> None:
    (root / "bomb.png").write_bytes(decompression_bomb(side))
    assert (root / "bomb.png").stat().st_size < 1024 * 1024

    began = time.monotonic()
    with pytest.raises(ToolFailed, match="of more than 80 megapixels; it is not decoded"):
        await TOOL.run(ReadFileParams(path="bomb.png"), local_ctx)

    assert time.monotonic() - began < 2.0


# --- permission, history ----------------------------------------------------------------------


async def test_an_image_outside_the_roots_asks_as_any_read_does(
    root: Path, tmp_path: Path, local_ctx: ToolContext
) -> None:
    outside = tmp_path / "elsewhere" / "shot.png"
    outside.parent.mkdir()
    outside.write_bytes(image_bytes("image/png"))
    (root / "inside.png").write_bytes(image_bytes("image/png"))
    link = root / "link.png"
    link.symlink_to(outside)

    def verdict(path: Path, mode: str = "ask") -> str:
        params = ReadFileParams(path=str(path))
        return decide(TOOL, params, local_ctx, mode, PermissionMemory())  # type: ignore[arg-type]

    assert verdict(outside) == "ask"
    assert verdict(link) == "ask", "a link inside to an image outside is outside"
    assert verdict(root / "inside.png") == "allow"
    assert verdict(root / "inside.png", "read-only") == "allow"
    assert verdict(outside, "bypass") == "allow"


async def test_the_image_a_read_gave_is_kept_in_the_session_log(
    root: Path, local_ctx: ToolContext
) -> None:
    (root / "shot.png").write_bytes(image_bytes("image/png"))
    outcome = await TOOL.run(ReadFileParams(path="shot.png"), local_ctx)
    record = MessageRecord(Message("tool", [ToolResultPart("call_1", outcome.model_parts)]))

    line = encode(record)

    assert decode(line) == record
    assert '"kind":"image"' in line


def test_pillow_is_not_imported_until_an_image_is_read() -> None:
    probe = "import sys, acp_agent.tools, acp_agent.engine; print('PIL' in sys.modules)"
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert found.stdout.strip() == "False"
