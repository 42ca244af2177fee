"""plan: the model's to-do list for the task, shown in the editor's plan view.

Each call replaces the whole plan. It lives in the session's tool state and is sent to the
client in full whenever it changes (ACP plan updates replace, they do not patch). The plan is
a list of steps, or one Markdown document (`markdown`) for a plan that reads better as prose;
an empty list with no document drops the plan (clients that track plans remove it).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..messages import PlanEntry, PlanPriority, PlanStatus, PlanUpdated
from .base import Tool, ToolContext, ToolOutcome, ToolParams


class PlanItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, description="What this step does, in a short sentence.")
    priority: PlanPriority = Field("medium", description="How important the step is.")
    status: PlanStatus = Field("pending", description="Where the step stands.")


class PlanParams(ToolParams):
    entries: list[PlanItem] = Field(
        default_factory=list,
        description="The complete plan, in order. It replaces the previous plan: repeat "
        "unchanged steps, and mark steps in_progress or completed as work goes on. An empty "
        "list (and no markdown) clears the plan.",
    )
    markdown: str | None = Field(
        None,
        min_length=1,
        description="Instead of entries: the whole plan as one Markdown document (use "
        "`- [ ]` / `- [x]` checkboxes for steps). Send the complete document each time.",
    )
    path: str | None = Field(
        None,
        min_length=1,
        description="With markdown: the file the plan is saved in (e.g. PLAN.md), if any, "
        "absolute or relative to the working directory; the editor can open it.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> PlanParams:
        if self.markdown is not None and self.entries:
            raise ValueError("give either entries or markdown, not both")
        if self.path is not None and self.markdown is None:
            raise ValueError("path goes with a markdown plan")
        return self


class Plan(Tool[PlanParams]):
    """Record or update the plan for a task of several steps; the user sees it beside the
    conversation. Send the whole list each time. Keep one step in_progress at a time and mark
    steps completed as soon as they are done. A plan written as a Markdown document goes in
    `markdown` instead (with its file's `path` if you saved it); an empty list clears the
    plan."""

    name = "plan"
    kind = "think"
    params_model = PlanParams

    def title(self, params: PlanParams, ctx: ToolContext) -> str:
        return "Update plan"

    async def run(self, params: PlanParams, ctx: ToolContext) -> ToolOutcome:
        if params.markdown is not None:
            return await self._markdown(params.markdown, params.path, ctx)
        entries = [PlanEntry(e.content, e.priority, e.status) for e in params.entries]
        if entries != ctx.state.plan or ctx.state.plan_markdown is not None:
            # In place: the state object is shared by every call of the session.
            ctx.state.plan[:] = entries
            ctx.state.plan_markdown = None
            await ctx.emit(PlanUpdated(tuple(entries)))
        return ToolOutcome(model_text=_summary(entries), raw_output={"entries": len(entries)})

    async def _markdown(self, markdown: str, path: str | None, ctx: ToolContext) -> ToolOutcome:
        if markdown != ctx.state.plan_markdown:
            ctx.state.plan.clear()
            ctx.state.plan_markdown = markdown
            where = None if path is None else _absolute(ctx.cwd, path)
            await ctx.emit(PlanUpdated((), markdown=markdown, path=where))
        lines = len(markdown.splitlines())
        return ToolOutcome(
            model_text=f"Plan updated: a Markdown document of {lines} lines.",
            raw_output={"markdown_lines": lines},
        )


def _absolute(cwd: Path, path: str) -> str:
    """`path` against the working directory, `..` folded (a string operation, no disk)."""
    return os.path.normpath(cwd / path)


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
