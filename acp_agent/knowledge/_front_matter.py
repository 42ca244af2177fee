"""Reading a markdown file that may open with YAML front matter, without ever raising.

A file has front matter when its first line is `---` (after an optional UTF-8 byte-order
mark); the YAML runs to the next line that is `---`, and must close within the first
`front_matter_limit` bytes. The YAML is read with `yaml.safe_load`; when that fails, flat
`key: value` lines are still accepted as they stand, because people write
`description: Use when: the user asks` and `argument-hint: [file] [focus]` (both invalid
YAML) and every tool that reads these files accepts them.

Whatever is wrong with a file (unreadable, not a regular file, too large, not UTF-8, front
matter never closed, YAML that does not parse or is not a mapping) comes back as `problem`,
one phrase for a warning; the caller names the file and skips it. PyYAML is imported on
first use, when such a file exists.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FRONT_MATTER_LIMIT = 64 * 1024
"""Bytes of a file looked at for its front matter; the body may run on beyond."""

_BOM = b"\xef\xbb\xbf"
_OPENING = re.compile(rb"---[ \t]*\r?\n")
_CLOSING = re.compile(rb"^---[ \t]*\r?\n", re.MULTILINE)
_FLAT_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*))?")


@dataclass(frozen=True, slots=True)
class Document:
    """A markdown file as read: its front matter fields, its body, or why it is unusable."""

    fields: dict[str, Any] | None  # None: the file has no front matter
    body: str  # the text after the front matter ("" unless the body was asked for)
    problem: str | None = None  # set: skip the file; a phrase such as "it is not UTF-8 text"


def read_document(
    path: Path, *, body_limit: int | None, front_matter_limit: int = FRONT_MATTER_LIMIT
) -> Document:
    """Read `path`: the whole file when a `body_limit` is given (and refuse a larger one),
    else only its first `front_matter_limit` bytes, for the front matter alone."""
    with_body = body_limit is not None
    try:
        data = _read_bytes(path, front_matter_limit if body_limit is None else body_limit + 1)
    except _Unusable as unusable:
        return _unusable(str(unusable))
    if body_limit is not None and len(data) > body_limit:
        return _unusable(f"it is larger than {_size(body_limit)}")
    whole_file = with_body or len(data) < front_matter_limit
    data = data.removeprefix(_BOM)
    opening = _OPENING.match(data)
    if opening is None:
        body = _decode(data) if with_body else ""
        return _unusable("it is not UTF-8 text") if body is None else Document(None, body)
    # A closing `---` on the file's last line needs no newline after it.
    searched = data + b"\n" if whole_file and not data.endswith(b"\n") else data
    closing = _CLOSING.search(searched, opening.end(), front_matter_limit)
    if closing is None:
        if whole_file and len(searched) <= front_matter_limit:
            return _unusable("its front matter never closes with a `---` line")
        return _unusable(f"its front matter runs past the first {_size(front_matter_limit)}")
    yaml_text = _decode(data[opening.end() : closing.start()])
    if yaml_text is None:
        return _unusable("its front matter is not UTF-8 text")
    fields, problem = _parse_fields(yaml_text)
    if fields is None:
        return _unusable(problem or "its front matter cannot be read")
    body = _decode(data[closing.end() :]) if with_body else ""
    if body is None:
        return _unusable("it is not UTF-8 text")
    return Document(fields, body.lstrip("\n"))


class _Unusable(Exception):
    """Why a file cannot be read, as a phrase for the warning."""


def _read_bytes(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of the regular file at `path` (symlinks followed)."""
    # Non-blocking open: a FIFO named like a markdown file would otherwise hang us forever;
    # opened this way it returns at once and fstat shows what it is.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the path
        raise _Unusable(
            f"it cannot be opened ({getattr(error, 'strerror', None) or error})"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise _Unusable("it is not a regular file")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            return file.read(limit)
    except OSError as error:
        raise _Unusable(f"it cannot be read ({error.strerror or error})") from None
    finally:
        os.close(descriptor)


def _parse_fields(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The front matter's fields, or None and why not."""
    import yaml  # loaded only once a file with front matter turns up

    try:
        loaded = yaml.safe_load(text)
    # Not only YAMLError: PyYAML's constructors raise ValueError on a date such as
    # 2024-13-45, and deep nesting raises RecursionError. None of it may escape.
    except Exception as error:
        flat = _flat_pairs(text)
        if flat is not None:
            return flat, None
        return None, f"its front matter is not valid YAML ({_yaml_error(error)})"
    if loaded is None:  # `---` straight after `---`: front matter with no fields
        return {}, None
    if not isinstance(loaded, dict):
        return None, "its front matter is not a mapping of `key: value` fields"
    return {key: value for key, value in loaded.items() if isinstance(key, str)}, None


def _flat_pairs(text: str) -> dict[str, Any] | None:
    """`key: value` lines taken literally (quotes around a value removed), or None when any
    line is something else."""
    fields: dict[str, Any] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        pair = _FLAT_PAIR.fullmatch(line.rstrip())
        if pair is None:
            return None
        fields[pair[1]] = _unquote((pair[2] or "").strip())
    return fields


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _yaml_error(error: Exception) -> str:
    """One line for a PyYAML error: what went wrong and the file line where it did."""
    problem = getattr(error, "problem", None)
    first_line = next(iter(str(error).splitlines()), "") or type(error).__name__
    text = problem if isinstance(problem, str) else first_line
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return text
    return f"{text}, line {mark.line + 2}"  # +1: counted from 1; +1: the opening `---` line


def _decode(data: bytes) -> str | None:
    try:
        return data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError:
        return None


def _unusable(problem: str) -> Document:
    return Document(None, "", problem)


def _size(n_bytes: int) -> str:
    if n_bytes % (1024 * 1024) == 0:
        return f"{n_bytes // (1024 * 1024)} MiB"
    if n_bytes % 1024 == 0:
        return f"{n_bytes // 1024} KiB"
    return f"{n_bytes} bytes"
