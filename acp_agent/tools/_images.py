"""Images on disk for `read_file`: recognised by their first bytes, checked by decoding them,
and scaled down to what every vendor takes.

ACP v1 lets an editor serve text reads only (`fs/read_text_file`), so images are read from
the local disk, after the permission policy has judged the path as for any read.

The type comes from the magic bytes, never the name: a `.png` that holds text is read as
text, a `.txt` that holds a PNG is an image. Every image is decoded before it is sent, since
one the vendor cannot decode would stay in the history and fail every later request of the
session. One over `MAX_LONG_SIDE` pixels or `MAX_SENT_BYTES` is scaled down, keeping its
aspect ratio, and encoded anew (JPEG stays JPEG; PNG, GIF and WebP become PNG, or JPEG when
the PNG is still too large). Pillow is imported on the first image, never at start-up.
"""

from __future__ import annotations

import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from .base import ToolFailed

if TYPE_CHECKING:
    from PIL.Image import Image

MAX_FILE_BYTES = 50 * 1024 * 1024
"""Larger files are refused before they are read."""
MAX_LONG_SIDE = 1568
"""Anthropic's recommended longest side: larger images are scaled down by the API anyway,
at a cost in time and tokens."""
MAX_SENT_BYTES = 5 * 1024 * 1024 * 3 // 4
"""Anthropic refuses an image whose base64 text passes 5 MB (OpenAI takes 20 MB): the
bytes that encode to at most that."""
MAX_DECODED_PIXELS = 80_000_000
"""Larger images (after a JPEG's cheap reduced decoding) are refused rather than decoded:
an 80-megapixel RGBA image takes 320 MB of memory. Just below Pillow's own bomb warning."""
JPEG_QUALITY = 85
SHRINK_STEP = 0.75
"""Each further try at a size that fits `MAX_SENT_BYTES` is this much smaller."""

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_SNIFF_BYTES = 12
_PILLOW_FORMATS = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/gif": "GIF",
    "image/webp": "WEBP",
}
_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}
_ORIENTATION_TAG = 0x0112
_TURNED_ORIENTATIONS = frozenset({5, 6, 7, 8})
"""EXIF orientations shown a quarter turn from how the pixels are stored."""


def sniff(head: bytes) -> str | None:
    """The image type the first bytes of a file announce, or None when they announce none."""
    for magic, mime_type in _MAGIC:
        if head.startswith(magic):
            return mime_type
    if len(head) >= _SNIFF_BYTES and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True, slots=True)
class Size:
    width: int
    height: int

    def __str__(self) -> str:
        return f"{self.width}x{self.height}"


@dataclass(frozen=True, slots=True)
class DiskImage:
    """An image as it will be sent, and what the file held."""

    data: bytes
    mime_type: str
    size: Size
    file_mime_type: str
    file_size: Size
    """As shown (EXIF orientation applied)."""
    file_bytes: int

    @property
    def scaled(self) -> bool:
        return self.size != self.file_size

    def summary(self) -> str:
        """What was done, in a few words: `image/png 3024x4032 scaled to 1176x1568, 412 KB`."""
        sent = human_bytes(len(self.data))
        if self.scaled:
            kind = "" if self.mime_type == self.file_mime_type else f" as {self.mime_type}"
            return f"{self.file_mime_type} {self.file_size} scaled to {self.size}{kind}, {sent}"
        if len(self.data) != self.file_bytes or self.mime_type != self.file_mime_type:
            was = human_bytes(self.file_bytes)
            return (
                f"{self.file_mime_type} {self.size}, {was} re-encoded as {self.mime_type}, {sent}"
            )
        return f"{self.mime_type} {self.size}, {sent}"


def human_bytes(count: int) -> str:
    if count < 1024 * 1024:
        return f"{max(1, round(count / 1024))} KB"
    return f"{count / (1024 * 1024):.1f} MB"


async def read_image(path: Path) -> DiskImage | None:
    """The image at `path`, ready to send; None when the disk holds no image there (no such
    file, not a regular file, unreadable, or its bytes announce no image type): the caller
    reads it as text. Raises `ToolFailed` for an image too large or broken to send."""
    # Decoding cannot be interrupted; a cancelled turn need not wait for it.
    return await anyio.to_thread.run_sync(_read_image, path, abandon_on_cancel=True)


def _read_image(path: Path) -> DiskImage | None:
    try:
        # Non-blocking, so that a FIFO named like an image does not hang the open.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            mime_type = sniff(handle.read(_SNIFF_BYTES))
        except OSError:  # a directory, or unreadable: the text read reports it
            return None
        if mime_type is None:
            return None
        try:
            if info.st_size > MAX_FILE_BYTES:
                raise ToolFailed(_too_large(path, mime_type, info.st_size))
            handle.seek(0)
            data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise ToolFailed(f"{path} could not be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:  # it grew since we looked
        raise ToolFailed(_too_large(path, mime_type, len(data)))
    return prepare(data, mime_type, str(path))


def _too_large(path: Path, mime_type: str, size: int) -> str:
    return (
        f"{path} is a {_NAMES[mime_type]} image of {human_bytes(size)}; images over "
        f"{human_bytes(MAX_FILE_BYTES)} are not read. Make a smaller copy first "
        "(e.g. with a shell command) and read that."
    )


def prepare(data: bytes, mime_type: str, source: str) -> DiskImage:
    """The image `data` (of the sniffed `mime_type`) as it will be sent: checked by decoding
    it, and scaled down when over the limits. Raises `ToolFailed` when it cannot be decoded."""
    # Here: Pillow costs ~50 ms to import, paid by the first image read, not at start-up.
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data), formats=[_PILLOW_FORMATS[mime_type]]) as image:
            return _prepare(image, data, mime_type, source)
    except ToolFailed:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        # The warning is raised only where warnings are errors; elsewhere it is logged and
        # `MAX_DECODED_PIXELS` (below Pillow's warning) refuses the image.
        raise ToolFailed(_too_many_pixels(source, mime_type)) from None
    except UnidentifiedImageError:
        raise ToolFailed(_undecodable(source, mime_type, "its header is not valid")) from None
    except Exception as exc:  # Pillow's errors for broken files have no common base
        raise ToolFailed(_undecodable(source, mime_type, _reason(exc))) from None


def _prepare(image: Image, data: bytes, mime_type: str, source: str) -> DiskImage:
    shown = _shown_size(image)
    target = _fitting(shown, MAX_LONG_SIDE)
    if target == shown and len(data) <= MAX_SENT_BYTES:
        image.load()  # decodes it all: a broken body fails here, not at the vendor
        return DiskImage(data, mime_type, shown, mime_type, shown, len(data))
    if mime_type == "image/jpeg":
        # Decode at a fraction of the size (still at least the target): far faster, and far
        # less memory for a large photo.
        image.draft("RGB", _stored(image, target))
    if image.width * image.height > MAX_DECODED_PIXELS:
        raise ToolFailed(_too_many_pixels(source, mime_type, shown))
    image.load()
    upright = _upright(image)
    encoded, sent_mime, sent_size = _encode_fitting(upright, target, mime_type)
    return DiskImage(encoded, sent_mime, sent_size, mime_type, shown, len(data))


def _undecodable(source: str, mime_type: str, why: str) -> str:
    return (
        f"{source} starts like a {_NAMES[mime_type]} image but could not be decoded ({why}); "
        "the file may be truncated or damaged"
    )


def _too_many_pixels(source: str, mime_type: str, size: Size | None = None) -> str:
    dimensions = f" ({size})" if size else ""
    return (
        f"{source} is a {_NAMES[mime_type]} image{dimensions} of more than "
        f"{MAX_DECODED_PIXELS // 1_000_000} megapixels; it is not decoded. Make a smaller "
        "copy first (e.g. with a shell command) and read that."
    )


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:200]


def _shown_size(image: Image) -> Size:
    """The size as viewers show it: a quarter turn from the stored one for EXIF orientations
    5-8 (phone photos taken upright)."""
    width, height = image.size
    if _orientation(image) in _TURNED_ORIENTATIONS:
        width, height = height, width
    return Size(width, height)


def _orientation(image: Image) -> int:
    try:
        value = image.getexif().get(_ORIENTATION_TAG, 1)
    except Exception:  # a broken EXIF block: shown as stored
        return 1
    return value if isinstance(value, int) else 1


def _stored(image: Image, shown: Size) -> tuple[int, int]:
    """A shown size as the stored pixels have it."""
    if _orientation(image) in _TURNED_ORIENTATIONS:
        return shown.height, shown.width
    return shown.width, shown.height


def _fitting(size: Size, long_side: int) -> Size:
    """`size` scaled down (never up) so that its longer side is at most `long_side`."""
    longest = max(size.width, size.height)
    if longest <= long_side:
        return size
    scale = long_side / longest
    return Size(max(1, round(size.width * scale)), max(1, round(size.height * scale)))


def _upright(image: Image) -> Image:
    """The image as shown (EXIF orientation applied: the new file carries no EXIF) in a mode
    both PNG and resizing handle."""
    from PIL import ImageOps

    turned = ImageOps.exif_transpose(image) if _orientation(image) != 1 else image
    if turned.mode in ("RGB", "RGBA", "L", "LA"):
        return turned
    transparent = "transparency" in turned.info or turned.mode in ("PA", "RGBa", "La")
    return turned.convert("RGBA" if transparent else "RGB")


def _encode_fitting(image: Image, target: Size, mime_type: str) -> tuple[bytes, str, Size]:
    """The image at `target` (or smaller, until it fits `MAX_SENT_BYTES`): JPEG for a JPEG,
    else PNG, else JPEG when the PNG is too large."""
    size = target
    while True:
        resized = _resized(image, size)
        if mime_type != "image/jpeg":
            png = _encode(resized, "PNG")
            if len(png) <= MAX_SENT_BYTES:
                return png, "image/png", size
        jpeg = _encode(_opaque(resized), "JPEG")
        if len(jpeg) <= MAX_SENT_BYTES or max(size.width, size.height) <= 1:
            return jpeg, "image/jpeg", size
        size = _fitting(size, int(max(size.width, size.height) * SHRINK_STEP))


def _resized(image: Image, size: Size) -> Image:
    from PIL import Image as PillowImage

    if image.size == (size.width, size.height):
        return image
    return image.resize((size.width, size.height), PillowImage.Resampling.LANCZOS, reducing_gap=3.0)


def _opaque(image: Image) -> Image:
    """JPEG has no transparency: transparent pixels become white, as most viewers show them."""
    from PIL import Image as PillowImage

    if image.mode in ("RGB", "L"):
        return image
    if image.mode not in ("RGBA", "LA"):
        return image.convert("RGB")
    rgba = image.convert("RGBA")
    background = PillowImage.new("RGB", rgba.size, (255, 255, 255))
    background.paste(rgba, mask=rgba.getchannel("A"))
    return background


def _encode(image: Image, pillow_format: str) -> bytes:
    out = io.BytesIO()
    if pillow_format == "JPEG":
        image.save(out, "JPEG", quality=JPEG_QUALITY, optimize=True)
    else:
        image.save(out, "PNG", optimize=False, compress_level=6)
    return out.getvalue()


__all__ = ["MAX_FILE_BYTES", "MAX_LONG_SIDE", "MAX_SENT_BYTES", "DiskImage", "read_image", "sniff"]
