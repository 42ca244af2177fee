"""Small text helpers shared by the tools: display paths, fences, cuts, changed lines."""

from __future__ import annotations

import os.path
import re
from pathlib import Path


def display_path(path: Path, cwd: Path) -> str:
    """`path` relative to the session cwd when it lies under it, else absolute."""
    if path == cwd:
        return "."
    if path.is_relative_to(cwd):
        return path.relative_to(cwd).as_posix()
    return str(path)


def fenced(text: str, info: str = "") -> str:
    """`text` in a Markdown code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{info}\n{body}{fence}"


def cut_middle(text: str, head: int, tail: int) -> tuple[str, int]:
    """`text` with its middle replaced by a marker when longer than head + tail characters.

    Returns the text and how many characters were left out. The tail is kept larger by the
    callers: errors and summaries come last in most command output.
    """
    if len(text) <= head + tail:
        return text, 0
    omitted = len(text) - head - tail
    marker = f"\n[... {omitted} characters omitted ...]\n"
    return text[:head] + marker + text[len(text) - tail :], omitted


def first_changed_line(old: str, new: str) -> int:
    """The 1-based line where `new` first differs from `old` (1 for a new file)."""
    # Character-wise on purpose: these are texts, not paths.
    common = os.path.commonprefix([old, new])  # noqa: RUF071
    return common.count("\n") + 1


def line_of(text: str, index: int) -> int:
    """The 1-based line number of character `index` in `text`."""
    return text.count("\n", 0, index) + 1


def count_lines(text: str) -> int:
    return len(split_lines(text))


def split_lines(text: str) -> list[str]:
    """Lines as editors count them: only LF, CRLF and CR end a line (not form feeds or
    Unicode separators, which `str.splitlines` also splits on and would shift numbers)."""
    lines = _LINE_END.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


_LINE_END = re.compile(r"\r\n|\r|\n")


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"
