"""Logging to stderr or a file: never to stdout, which carries protocol frames only."""

from __future__ import annotations

import logging
import sys

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
