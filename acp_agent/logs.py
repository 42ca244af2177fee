"""Logging to stderr or a file: never to stdout, which carries protocol frames only.

Configured once, on the main thread, before anything is served: the command line's
`--log-file` / `--log-level` win, and the config file's `log_file` / `log_level` fill in
what the command line left out.
"""

from __future__ import annotations

import logging
import os
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_redact: Callable[[str], str] | None = None


def redact_with(redact: Callable[[str], str] | None) -> None:
    """Pass every log line (tracebacks too) through `redact` from now on: the agent's keys,
    known once the config is read, never reach the log (frames quote what the editor sent)."""
    global _redact
    _redact = redact


def redacted(text: str) -> str:
    """`text` without the secrets `redact_with` knows: for text cut short before it is
    logged (a key cut in half would no longer be recognised in the line)."""
    redact = _redact
    return text if redact is None else redact(text)


class _Redacting(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        try:
            return redacted(line)
        except Exception:  # a failing redactor must not lose the line: keep its keys out
            return f"{record.levelname} {record.name}: (a line that could not be redacted)"


def configure(level: str = "info", file: str | None = None) -> None:
    """Log at `level` to `file`, else to stderr. A file that cannot be opened never stops
    the agent (an editor would show a dead agent): the log goes to stderr, with a warning."""
    handler: logging.Handler
    unopened: str | None = None
    try:
        handler = (
            logging.FileHandler(file, encoding="utf-8")
            if file
            else logging.StreamHandler(sys.stderr)
        )
    except OSError as exc:
        handler = logging.StreamHandler(sys.stderr)
        unopened = f"cannot open the log file {file}: {exc.strerror or exc}; logging to stderr"
    handler.setFormatter(_Redacting(FORMAT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The HTTP stack logs every request at INFO; keep it for --log-level debug only.
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "openai"):
        logging.getLogger(noisy).setLevel(max(root.level, logging.WARNING))
    if unopened is not None:
        logging.getLogger("acp_agent").warning("%s", unopened)


def log_file_problem(file: str) -> str | None:
    """Why `file` cannot take the log (checked without creating it), or None if it can:
    for `run` and `doctor`, which say so before the agent falls back to stderr."""
    path = Path(file).expanduser()
    if path.is_dir():
        return f"cannot open the log file {file}: it is a directory"
    if path.exists():
        return None if os.access(path, os.W_OK) else f"cannot write the log file {file}"
    parent = path.parent
    if not parent.is_dir():
        return f"cannot open the log file {file}: no directory {parent}"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create the log file {file}: {parent} is not writable"
    return None


def settings_from_config(path: str | None) -> tuple[str | None, str | None]:
    """The config file's `log_level` and `log_file`, read without validating the file.

    Cheap (tomllib only, no pydantic), so logging is set before the server starts; a file
    that cannot be read gives (None, None) here and its error is reported by the full load.
    """
    if path is None:
        return None, None
    try:
        data: dict[str, Any] = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None, None
    level, file = data.get("log_level"), data.get("log_file")
    return (
        level if level in ("debug", "info", "warning", "error") else None,
        file if isinstance(file, str) and file else None,
    )
