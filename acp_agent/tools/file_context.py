"""What a mentioned file or directory gives the model (`@file` in the editor).

A text file is read through the editor when the client offers it (so unsaved buffers are
seen), else from the local disk, and comes with its path and line range:

    <file path="/abs/p.py" lines="10-25">
    ...
    </file>

cut at `max_bytes` on a line boundary, with a note saying where to read on. A directory
becomes a listing of what lies under it (`.gitignore` honoured, as in `search`; capped,
shallowest entries first), images and PDFs their bytes (the editor's fs reads text only, so
these are read locally), and a missing, binary or unreadable file a note, never an error.

The caller has checked the path against the permission policy already: reads here do not
ask again.
"""

from __future__ import annotations

import base64
import html
import logging
import mimetypes
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.from_thread

from ..messages import DocumentPart, ImagePart, TextPart
from ._filelist import list_files
from ._text import count_lines, plural
from .base import ToolContext, ToolFailed

log = logging.getLogger(__name__)

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
DOCUMENT_TYPES = frozenset({"application/pdf"})
MAX_MEDIA_BYTES = 10 * 1024 * 1024
"""Largest image or PDF sent (they cannot be cut; vendors refuse larger ones anyway)."""
MAX_LISTED = 300
"""Entries of a directory listing, the shallowest first."""
MAX_SCANNED = 20_000
"""Files looked at for a listing; a larger tree is listed from what was seen."""
BINARY_SNIFF_BYTES = 8192

MentionedContent = tuple[TextPart | ImagePart | DocumentPart, ...]


@dataclass(frozen=True, slots=True)
class LineRange:
    """1-based, inclusive; `last` None: to the end of the file."""

    first: int
    last: int | None = None

    @property
    def limit(self) -> int | None:
        return None if self.last is None else self.last - self.first + 1


async def read_context(
    ctx: ToolContext,
    path: Path,
    lines: LineRange | None = None,
    *,
    mime_type: str | None = None,
    max_bytes: int,
) -> MentionedContent:
    """The parts that give the model the file or directory at `path` (absolute)."""
    info = await anyio.to_thread.run_sync(_look, path)
    if info.kind == "directory":
        return (TextPart(await anyio.to_thread.run_sync(_listing, path)),)
    kind = (mime_type or mimetypes.guess_type(path.name)[0] or "").lower()
    if kind in IMAGE_TYPES or kind in DOCUMENT_TYPES:
        return await _media(path, info, kind)
    if info.kind == "other":
        return (_note(path, "it is not a regular file"),)
    if info.binary:
        return (_note(path, f"it is a binary file ({kind or 'unknown type'})"),)
    try:
        text, read_to_end = await _read_text(ctx, path, lines, info, max_bytes)
    except ToolFailed as exc:
        return (_note(path, str(exc)),)
    if text is None:
        return (_note(path, "it does not exist"),)
    return (
        TextPart(_file_element(str(path), text, lines or LineRange(1), read_to_end, max_bytes)),
    )


def given_text_context(source: str, text: str, lines: LineRange | None, max_bytes: int) -> str:
    """The text the editor sent for a mention of `source` (a path, else its URI), as a read
    of it would give it: in a `<file>` element with its range, cut at `max_bytes`."""
    return _file_element(source, text, lines or LineRange(1), True, max_bytes)


# --- looking before reading ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Info:
    kind: str
    """"missing", "directory", "file" or "other" (a device, a pipe: never read)."""
    size: int = 0
    binary: bool = False
    """A NUL byte in the first bytes: not text."""


def _look(path: Path) -> _Info:
    try:
        mode = path.stat().st_mode
    except OSError:
        return _Info("missing")
    if stat.S_ISDIR(mode):
        return _Info("directory")
    if not stat.S_ISREG(mode):
        return _Info("other")
    try:
        with path.open("rb") as handle:
            head = handle.read(BINARY_SNIFF_BYTES)
        return _Info("file", path.stat().st_size, b"\0" in head)
    except OSError:
        return _Info("file")  # unreadable here: the editor may still read it


# --- text ---------------------------------------------------------------------------------


async def _read_text(
    ctx: ToolContext, path: Path, lines: LineRange | None, info: _Info, max_bytes: int
) -> tuple[str | None, bool]:
    """The text of the range (or file), at most about `max_bytes` of it, and whether it was
    read to its end; (None, True) when the file does not exist."""
    first = lines.first if lines else 1
    limit = lines.limit if lines else None
    if ctx.editor.can_read_files:
        fitting: int | None = None
        if info.kind == "file" and info.size > max_bytes:
            # A large file: ask the editor for no more lines than can be shown (the disk's
            # copy tells how many; its unsaved buffer is about the same).
            fitting = await anyio.to_thread.run_sync(_lines_within, path, first, max_bytes)
        asked = limit if fitting is None else fitting if limit is None else min(limit, fitting)
        try:
            text = await ctx.editor.read_text_file(str(path), first, asked)
        except ToolFailed as exc:
            if info.kind == "missing":
                return None, True
            # Outside its project some editors refuse (acpx: outside the cwd); the user
            # allowed the read, and the disk has the file.
            log.info("the editor could not read %s (%s); reading it from disk", path, exc)
        else:
            if not text and info.kind == "missing":
                return None, True  # a client that answers a missing file with empty content
            stopped_short = asked != limit and count_lines(text) >= (asked or 0)
            return text, not stopped_short
    if info.kind == "missing":
        return None, True
    return await anyio.to_thread.run_sync(_read_local, path, first, limit, max_bytes)


def _read_local(
    path: Path, first: int, limit: int | None, max_bytes: int
) -> tuple[str | None, bool]:
    """Lines `first`.. (at most `limit`) until just past `max_bytes`, and whether they are
    all there; bad bytes become U+FFFD."""
    chunks: list[bytes] = []
    size = 0
    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if number < first:
                    continue
                if limit is not None and len(chunks) >= limit:
                    break
                if size > max_bytes:
                    return _decode(chunks), False
                chunks.append(line)
                size += len(line)
    except FileNotFoundError:
        return None, True
    except OSError as exc:
        raise ToolFailed(f"it could not be read ({exc.strerror or exc})") from None
    return _decode(chunks), True


def _lines_within(path: Path, first: int, max_bytes: int) -> int:
    """How many lines from `first` hold `max_bytes`, plus one (to see that more follow)."""
    count = size = 0
    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if number < first:
                    continue
                size += len(line)
                if size > max_bytes:
                    break
                count += 1
    except OSError:
        pass
    return count + 1


def _decode(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", errors="replace")


def _file_element(
    source: str, text: str, lines: LineRange, read_to_end: bool, max_bytes: int
) -> str:
    """The text in a `<file>` element naming its path and, when not the whole file, its
    lines; cut at `max_bytes` on a line boundary, with a note where to read on."""
    data = text.encode("utf-8")
    cut = len(data) > max_bytes or not read_to_end
    within_line = False
    if len(data) > max_bytes:
        head = data[:max_bytes]
        end = head.rfind(b"\n")
        within_line = end < 0
        text = (head[: end + 1] if end >= 0 else head).decode("utf-8", errors="ignore")
    count = count_lines(text)
    first = lines.first
    last = first + count - 1
    body = text if not text or text.endswith("\n") else text + "\n"
    whole = first == 1 and not cut and lines.last is None
    attributes = f'path="{html.escape(source)}"'
    if not whole and count:
        attributes += f' lines="{first}-{last}"'
    notes: list[str] = []
    if not text:
        notes.append(f"[no lines at or after line {first}]" if first > 1 else "[empty file]")
    elif within_line:
        notes.append(f"[cut at {max_bytes} bytes within line {first}: the line goes on]")
    elif cut:
        notes.append(
            f"[cut at {max_bytes} bytes: showing lines {first}-{last}; the file goes on "
            f"(read_file with line={last + 1} reads further)]"
        )
    tail = "".join(f"{note}\n" for note in notes)
    return f"<file {attributes}>\n{body}{tail}</file>"


# --- media --------------------------------------------------------------------------------


async def _media(path: Path, info: _Info, mime_type: str) -> MentionedContent:
    if info.kind == "missing":
        return (_note(path, "it does not exist"),)
    if info.kind != "file":
        return (_note(path, "it is not a regular file"),)
    if info.size > MAX_MEDIA_BYTES:
        limit = MAX_MEDIA_BYTES // (1024 * 1024)
        return (_note(path, f"it is larger than {limit} MiB ({info.size} bytes)"),)
    try:
        data = await anyio.Path(path).read_bytes()
    except OSError as exc:
        return (_note(path, f"it could not be read ({exc.strerror or exc})"),)
    encoded = base64.b64encode(data).decode("ascii")
    caption = TextPart(f'<file path="{html.escape(str(path))}" type="{mime_type}"/>')
    if mime_type in IMAGE_TYPES:
        return caption, ImagePart(encoded, mime_type)
    return caption, DocumentPart(encoded, mime_type, path.name)


# --- directories --------------------------------------------------------------------------


def _listing(directory: Path) -> str:
    """What lies under `directory`: files and (with a trailing `/`) directories, relative
    to it, the shallowest first when there are more than MAX_LISTED."""
    entries: set[str] = set()
    complete = True
    for scanned, path in enumerate(list_files(directory, _check_cancelled)):
        if scanned == MAX_SCANNED:
            complete = False
            break
        relative = path.relative_to(directory).as_posix()
        entries.update(_with_parents(relative))
    chosen = sorted(entries, key=lambda entry: (entry.rstrip("/").count("/"), entry))
    shown = sorted(chosen[:MAX_LISTED])
    notes: list[str] = []
    if not entries:
        notes.append("[empty, or every file in it is ignored]")
    if len(chosen) > MAX_LISTED:
        notes.append(
            f"[{len(shown)} of {plural(len(chosen), 'entry', 'entries')} shown, the "
            "shallowest first; mention a subdirectory or use search to see more]"
        )
    if not complete:
        notes.append(f"[listed from the first {MAX_SCANNED} files found; there are more]")
    body = "".join(f"{line}\n" for line in [*shown, *notes])
    return f'<directory path="{html.escape(str(directory))}">\n{body}</directory>'


def _with_parents(relative: str) -> Iterator[str]:
    """`a/b/c.py` -> `a/`, `a/b/`, `a/b/c.py`."""
    parts = relative.split("/")
    for depth in range(1, len(parts)):
        yield "/".join(parts[:depth]) + "/"
    yield relative


def _check_cancelled() -> None:
    anyio.from_thread.check_cancelled()


def _note(path: Path, why: str) -> TextPart:
    return TextPart(f"[the mentioned file {path} was not read: {why}]")


__all__ = ["LineRange", "MentionedContent", "read_context"]
