"""Logging to stderr or a file: never to stdout, which carries protocol frames only.

Configured once, on the main thread, before anything is served: the command line's
`--log-file` / `--log-level` win, and the config file's `log_file` / `log_level` fill in
what the command line left out.
"""

from __future__ import annotations

import logging
import sys
import tomllib
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str = "info", file: str | None = None) -> None:
    handler: logging.Handler = (
        logging.FileHandler(file, encoding="utf-8") if file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The HTTP stack logs every request at INFO; keep it for --log-level debug only.
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "openai"):
        logging.getLogger(noisy).setLevel(max(root.level, logging.WARNING))


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
