from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from tool_fakes import Events, make_context

from acp_agent.messages import PlanEntry, PlanUpdated
from acp_agent.tools import SessionToolState
from acp_agent.tools.plan import Plan, PlanParams

pytestmark = pytest.mark.anyio

TOOL = Plan()


def plan(*entries: dict[str, str]) -> PlanParams:
    return PlanParams.model_validate({"entries": list(entries)})


async def test_every_change_emits_the_full_plan_and_stores_it_in_the_session(
    root: Path, events: Events
) -> None:
    state = SessionToolState()
    ctx = make_context(root, None, events=events, state=state)

    first = await TOOL.run(
        plan({"content": "Read code", "priority": "high"}, {"content": "Fix bug"}), ctx
    )
    await TOOL.run(
        plan(
            {"content": "Read code", "priority": "high", "status": "completed"},
            {"content": "Fix bug", "status": "in_progress"},
        ),
        ctx,
    )

    expected_first = (PlanEntry("Read code", "high", "pending"), PlanEntry("Fix bug"))
    expected_second = (
        PlanEntry("Read code", "high", "completed"),
        PlanEntry("Fix bug", "medium", "in_progress"),
    )
    assert events.of(PlanUpdated) == [PlanUpdated(expected_first), PlanUpdated(expected_second)]
    assert state.plan == list(expected_second)
    assert first.model_text == "Plan updated: 2 steps (2 pending)."


async def test_an_unchanged_plan_is_not_sent_again(root: Path, events: Events) -> None:
    ctx = make_context(root, None, events=events)
    params = plan({"content": "Only step", "status": "completed"})

    await TOOL.run(params, ctx)
    outcome = await TOOL.run(params, ctx)

    assert len(events.of(PlanUpdated)) == 1
    assert outcome.model_text == "Plan updated: 1 steps (1 completed)."


async def test_an_empty_list_clears_the_plan(root: Path, events: Events) -> None:
    state = SessionToolState(plan=[PlanEntry("old")])
    ctx = make_context(root, None, events=events, state=state)

    outcome = await TOOL.run(plan(), ctx)

    assert state.plan == []
    assert events.of(PlanUpdated) == [PlanUpdated(())]
    assert outcome.model_text == "Plan cleared."


def test_entries_are_validated() -> None:
    with pytest.raises(ValidationError):
        plan({"content": "x", "status": "done"})
    with pytest.raises(ValidationError):
        plan({"content": "x", "priority": "urgent"})


def test_plan_is_a_read_only_think_tool() -> None:
    assert (TOOL.kind, TOOL.read_only) == ("think", True)


async def test_a_markdown_plan_is_sent_whole_with_its_file_and_cleared_by_an_empty_list(
    root: Path, events: Events
) -> None:
    state = SessionToolState(plan=[PlanEntry("old")])
    ctx = make_context(root, None, events=events, state=state)
    doc = "# Plan\n- [x] Read\n- [ ] Fix\n"

    outcome = await TOOL.run(PlanParams(markdown=doc, path="PLAN.md"), ctx)
    await TOOL.run(PlanParams(markdown=doc, path="PLAN.md"), ctx)  # unchanged: not sent again
    await TOOL.run(plan(), ctx)

    assert events.of(PlanUpdated) == [
        PlanUpdated((), markdown=doc, path=str(ctx.cwd / "PLAN.md")),
        PlanUpdated(()),
    ]
    assert (state.plan, state.plan_markdown) == ([], None)
    assert outcome.model_text == "Plan updated: a Markdown document of 3 lines."


def test_a_plan_is_either_entries_or_markdown() -> None:
    with pytest.raises(ValidationError, match="not both"):
        PlanParams.model_validate({"entries": [{"content": "x"}], "markdown": "# x"})
    with pytest.raises(ValidationError, match="markdown plan"):
        PlanParams.model_validate({"path": "PLAN.md"})
