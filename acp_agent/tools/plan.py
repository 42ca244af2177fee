"""plan: the model's to-do list for the task, shown in the editor's plan view.

Each call replaces the whole plan. It lives in the session's tool state and is sent to the
client in full whenever it changes (ACP plan updates replace, they do not patch).
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from ..messages import PlanEntry, PlanPriority, PlanStatus, PlanUpdated
from .base import Tool, ToolContext, ToolOutcome, ToolParams


class PlanItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, description="What this step does, in a short sentence.")
    priority: PlanPriority = Field("medium", description="How important the step is.")
    status: PlanStatus = Field("pending", description="Where the step stands.")


class PlanParams(ToolParams):
    entries: list[PlanItem] = Field(
        description="The complete plan, in order. It replaces the previous plan: repeat "
        "unchanged steps, and mark steps in_progress or completed as work goes on."
    )


class Plan(Tool[PlanParams]):
    """Record or update the plan for a task of several steps; the user sees it beside the
    conversation. Send the whole list each time. Keep one step in_progress at a time and mark
    steps completed as soon as they are done."""

    name = "plan"
    kind = "think"
    params_model = PlanParams

    def title(self, params: PlanParams, ctx: ToolContext) -> str:
        return "Update plan"

    async def run(self, params: PlanParams, ctx: ToolContext) -> ToolOutcome:
        entries = [PlanEntry(e.content, e.priority, e.status) for e in params.entries]
        if entries != ctx.state.plan:
            # In place: the state object is shared by every call of the session.
            ctx.state.plan[:] = entries
            await ctx.emit(PlanUpdated(tuple(entries)))
        return ToolOutcome(model_text=_summary(entries), raw_output={"entries": len(entries)})


def _summary(entries: list[PlanEntry]) -> str:
    if not entries:
        return "Plan cleared."
    counts = Counter(entry.status for entry in entries)
    parts = [
        f"{counts[status]} {status.replace('_', ' ')}"
        for status in ("completed", "in_progress", "pending")
        if counts[status]
    ]
    return f"Plan updated: {len(entries)} steps ({', '.join(parts)})."
