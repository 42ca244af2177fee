"""The one-line status a run keeps at the bottom of a terminal's stderr while it waits.

    ⠹ openai/gpt-4.1 · 12s · running: Read /src/app.py

Drawn only when stderr is a terminal, redrawn a few times a second, and wiped before
anything else is written there (see `Console`), so logs and pipes never see it.
"""

from __future__ import annotations

from ..durations import COMPACT, format_duration

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
REFRESH_SECONDS = 0.2
CLEAR_LINE = "\r\x1b[2K"


def format_elapsed(seconds: float) -> str:
    return format_duration(seconds, COMPACT)


def format_status(
    model: str, elapsed: float, tool: str | None, *, frame: int = 0, width: int = 80
) -> str:
    """The status text, cut to `width - 1` columns so the terminal never wraps it (a
    wrapped line could not be wiped with one carriage return)."""
    activity = f"running: {tool}" if tool else "waiting for the model"
    text = f"{SPINNER[frame % len(SPINNER)]} {model} · {format_elapsed(elapsed)} · {activity}"
    limit = max(width - 1, 10)
    return text if len(text) <= limit else text[: limit - 1] + "…"
