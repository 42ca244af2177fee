"""How long something has run, as people read it: "12s" or "3 min 05 s".

One formatter in two styles: the compact one of the headless runner's status line, and the
spelt-out one of the background job list the model and the user read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DurationStyle:
    hours: str
    minutes: str
    seconds: str
    gap: str
    """Between the two parts of a duration over a minute."""


COMPACT = DurationStyle("h", "m", "s", gap="")
"""12s, 3m05s, 1h02m."""
SPELT_OUT = DurationStyle(" h", " min", " s", gap=" ")
"""12 s, 3 min 05 s, 1 h 02 min."""


def format_duration(seconds: float, style: DurationStyle) -> str:
    """Whole seconds under a minute, then minutes and seconds, then hours and minutes."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}{style.seconds}"
    minutes, whole = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}{style.minutes}{style.gap}{whole:02d}{style.seconds}"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}{style.hours}{style.gap}{minutes:02d}{style.minutes}"
