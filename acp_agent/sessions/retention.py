"""Which stored sessions go: pruning by age and count, and the sweep when the agent starts.

Age is the time since a session was last active (its summary's `updated_at`), so a long
session still in use is never old. A prune removes the sessions older than `older_than`
that are not among the `keep` most recently active (each rule alone does what it says);
`origin` narrows it to the runs of `acp-agent run` or to editor sessions. A session open in
a live agent (its log locked) is never removed: it is reported as kept.

Sessions that never got a prompt (an editor opened one and went away) are removed by the
lifecycle when they close; one a crash left behind is removed here once it is older than
`EMPTY_GRACE`, so a session another agent just opened is never taken from it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

from .errors import SessionLocked, SessionNotFound, StoreError
from .records import ORIGIN_RUN
from .store import SessionStore, SessionSummary

log = logging.getLogger(__name__)

EMPTY_GRACE: Final = timedelta(days=7)
"""How old a never-prompted session that no agent holds open must be to be swept away."""
_DURATION: Final = re.compile(r"(\d+)\s*([smhdw])")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

Origin = Literal["run", "editor"]


@dataclass(frozen=True, slots=True)
class PrunePlan:
    older_than: timedelta | None = None
    """Remove sessions inactive for longer than this (None: any age)."""
    keep: int | None = None
    """Keep the `keep` most recently active whatever their age (None: no such floor)."""
    origin: Origin | None = None
    """Only sessions of `acp-agent run` ("run") or of editors ("editor"); None: both."""
    empty: bool = True
    """Also remove never-prompted sessions older than `EMPTY_GRACE`."""


@dataclass(frozen=True, slots=True)
class PruneReport:
    removed: tuple[SessionSummary, ...]
    locked: tuple[SessionSummary, ...]
    """Due to go, but open in a live agent: kept."""


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `2w`, `90m`, `1d12h`: a `ValueError` naming the forms for anything else."""
    cleaned = text.strip().lower()
    parts = _DURATION.findall(cleaned)
    if not parts or _DURATION.sub("", cleaned).strip():
        raise ValueError(f"not a duration: {text!r} (a number and a unit: 30d, 12h, 2w, 90m, 45s)")
    return sum((timedelta(**{_UNITS[unit]: int(number)}) for number, unit in parts), timedelta())


def due(
    summaries: Sequence[SessionSummary], plan: PrunePlan, now: datetime
) -> list[SessionSummary]:
    """The sessions the plan's age and count rules remove (`summaries` newest first)."""
    chosen = [s for s in summaries if plan.origin is None or _origin(s) == plan.origin]
    if plan.keep is not None:
        chosen = chosen[plan.keep :]
    if plan.older_than is not None:
        chosen = [s for s in chosen if now - _time(s.updated_at) > plan.older_than]
    return chosen


def prune(store: SessionStore, plan: PrunePlan, now: datetime | None = None) -> PruneReport:
    """Remove what the plan says; blocking file I/O (callers on an event loop use a thread)."""
    now = datetime.now(UTC) if now is None else now
    summaries = store.summaries()
    going = due(summaries, plan, now) if _has_rule(plan) else []
    if plan.empty:
        named = {s.session_id for s in going}
        going += [s for s in summaries if s.session_id not in named and _left_empty(store, s, now)]
    removed: list[SessionSummary] = []
    locked: list[SessionSummary] = []
    for summary in going:
        try:
            store.delete(summary.session_id)
        except SessionLocked:
            locked.append(summary)
        except SessionNotFound:
            pass  # another process removed it meanwhile: what we wanted
        else:
            removed.append(summary)
    return PruneReport(tuple(removed), tuple(locked))


def sweep(store: SessionStore, retention_days: int) -> None:
    """What the agent does once at start-up, in the background: sessions inactive for more
    than `retention_days` (0: kept forever) and never-prompted leftovers go. Never raises."""
    older = timedelta(days=retention_days) if retention_days > 0 else None
    try:
        report = prune(store, PrunePlan(older_than=older) if older else PrunePlan())
    except (StoreError, OSError) as exc:
        log.warning("stored sessions: the start-up clean-up failed: %s", exc)
        return
    if report.removed:
        log.info(
            "stored sessions: removed %d (inactive over %d days, or never prompted)",
            len(report.removed),
            retention_days,
        )


def _has_rule(plan: PrunePlan) -> bool:
    return plan.older_than is not None or plan.keep is not None


def _left_empty(store: SessionStore, summary: SessionSummary, now: datetime) -> bool:
    if summary.title is not None or now - _time(summary.updated_at) <= EMPTY_GRACE:
        return False  # a title comes with the first prompt
    try:
        return not store.prompted(summary.session_id)
    except StoreError:
        return False  # unreadable: not ours to judge here


def _origin(summary: SessionSummary) -> Origin:
    return "run" if summary.origin == ORIGIN_RUN else "editor"


def _time(value: str) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


__all__ = [
    "EMPTY_GRACE",
    "Origin",
    "PrunePlan",
    "PruneReport",
    "due",
    "parse_duration",
    "prune",
    "sweep",
]
