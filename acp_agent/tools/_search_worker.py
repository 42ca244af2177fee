"""The search fallback when ripgrep is missing: our own listing and Python's `re`.

Run by `_ripgrep` as a child process (`python -P -m acp_agent.tools._search_worker
REQUEST`), never in the agent: a pattern like `(a+)+$` can backtrack in `re` for longer
than anyone waits, and only a process can be stopped in the middle of it. It lists files
as `_filelist` does (`.gitignore` honoured, through git when in a work tree) and writes
what it finds in ripgrep's formats, so one reader serves both. Content search skips large
and binary files, as ripgrep is told to.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from ._filelist import glob_regex, list_files
from ._ripgrep import BINARY_SNIFF_BYTES, MAX_FILE_BYTES, SearchRequest, match_record
from ._text import split_lines


def main(argv: list[str]) -> int:
    request = SearchRequest.from_json(argv[1])
    out = sys.stdout.buffer
    try:
        if request.pattern is None:
            out.writelines(os.fsencode(path) + b"\0" for path in _files(request))
            return 0
        flags = re.IGNORECASE if request.ignore_case else 0
        try:
            pattern = re.compile(request.pattern, flags)
        except re.error as exc:
            print(f"regex parse error (Python's re; ripgrep is missing): {exc}", file=sys.stderr)
            return 2
        for path in _files(request):
            out.writelines(_matches(path, pattern))
            out.flush()  # the reader may be waiting for it while the next file is slow
        return 0
    except BrokenPipeError:  # the reader has enough
        return 0


def _files(request: SearchRequest) -> Iterator[Path]:
    target = request.target
    files = [target] if target.is_file() else list_files(target)
    name = glob_regex(request.name_glob) if request.name_glob else None
    return (path for path in files if name is None or name.fullmatch(path.name))


def _matches(path: Path, pattern: re.Pattern[str]) -> Iterator[bytes]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return
        data = path.read_bytes()
    except OSError:
        return
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return
    text = data.decode("utf-8", errors="replace")
    for number, line in enumerate(split_lines(text), start=1):
        if pattern.search(line):
            yield match_record(path, number, line.encode("utf-8"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
