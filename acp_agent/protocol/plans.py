"""Plans as the client asked for them: `plan_update` / `plan_removed` for clients that
advertised `clientCapabilities.plan`, the legacy `plan` update (a full entry list) for others.
"""

from __future__ import annotations

import re
from typing import Any

from ..messages import PlanEntry, PlanStatus, PlanUpdated

JsonObject = dict[str, Any]

SESSION_PLAN_ID = "plan"
"""The id of the session's own plan: fixed, so every update of it (and its replay after a
load, from records written before ids existed) names the same plan."""

_STATUS: dict[str, PlanStatus] = {
    "x": "completed",
    "X": "completed",
    "~": "in_progress",
    "-": "in_progress",
}
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[([ xX~-])\]\s+(.+?)\s*$")


def plan_update(event: PlanUpdated) -> JsonObject:
    """`plan_update` for the plan, or `plan_removed` when it was dropped."""
    plan_id = event.plan_id or SESSION_PLAN_ID
    if event.removed:
        return {"sessionUpdate": "plan_removed", "planId": plan_id}
    if event.markdown is not None:
        plan: JsonObject = {"type": "markdown", "planId": plan_id, "content": event.markdown}
        if event.path is not None:
            plan["path"] = event.path
    else:
        plan = {"type": "items", "planId": plan_id, "entries": _entries(event.entries)}
    return {"sessionUpdate": "plan_update", "plan": plan}


def legacy_plan(event: PlanUpdated) -> JsonObject:
    """The `plan` update every v1 client understands; a Markdown plan becomes its checkbox
    lines (or its first line when it has none)."""
    entries = event.entries if event.markdown is None else markdown_entries(event.markdown)
    return {"sessionUpdate": "plan", "entries": _entries(entries)}


def markdown_entries(markdown: str) -> tuple[PlanEntry, ...]:
    """`- [ ] step` lines as pending entries, `- [x]` as completed, `- [~]`/`- [-]` as in
    progress; a document without checkboxes as one entry, its first line."""
    entries = []
    for line in markdown.splitlines():
        if (found := _CHECKBOX.match(line)) is not None:
            mark, text = found.groups()
            entries.append(PlanEntry(text, "medium", _STATUS.get(mark, "pending")))
    if entries:
        return tuple(entries)
    first = next((ln.strip().lstrip("#").strip() for ln in markdown.splitlines() if ln.strip()), "")
    return (PlanEntry(first or "Plan"),)


def _entries(entries: tuple[PlanEntry, ...]) -> list[JsonObject]:
    return [{"content": e.content, "priority": e.priority, "status": e.status} for e in entries]
