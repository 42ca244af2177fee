"""Every `session/update` payload, built as plain JSON, is what the schema models would send:
each kind validates as its `acp.schema` model (or the 1.25 extras the pinned package lacks)
and dumps back unchanged, so no field is misnamed, mistyped, missing or sent as null; the
plain ones also validate against the v1 JSON schema, stable and unstable (`schema_support`)."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import SessionNotification
from schema_support import assert_v1

from acp_agent.messages import (
    CommandInfo,
    CommandsChanged,
    CompactionFinished,
    CompactionStarted,
    CompactionSummaryChunk,
    DiffContent,
    DocumentPart,
    ImagePart,
    Location,
    MessageChunk,
    Notice,
    PlanEntry,
    PlanUpdated,
    ResourceLinkPart,
    SessionInfoChanged,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEvent,
    UsageUpdated,
    UserMessageChunk,
)
from acp_agent.protocol import schema
from acp_agent.protocol.updates import session_update

EVENTS: dict[str, TurnEvent] = {
    "message": MessageChunk("Hello", message_id="m1"),
    "message without id": MessageChunk("Hello"),
    "thought": ThoughtChunk("Let me think"),
    "user text": UserMessageChunk(TextPart("hi"), message_id="u1"),
    "user image": UserMessageChunk(ImagePart("aGk=", "image/png")),
    "user link": UserMessageChunk(ResourceLinkPart("file:///w/a.py", "a.py", "text/x-python")),
    "user link, no type": UserMessageChunk(ResourceLinkPart("file:///w/a", "a")),
    "user document": UserMessageChunk(DocumentPart("JVBE", "application/pdf", "file:///w/a.pdf")),
    "commands": CommandsChanged(
        (CommandInfo("compact", "Summarise the history"), CommandInfo("mcp", "Servers", "name"))
    ),
    "no commands": CommandsChanged(()),
    "title": SessionInfoChanged(title="Fix the tests", updated_at="2026-12-02T03:00:00Z"),
    "tool call": ToolCallStarted(
        "call_1",
        "Read a.py",
        "read",
        raw_input={"path": "a.py", "limit": None},
        locations=(Location("/w/a.py", 3), Location("/w/b.py")),
        content=(TextPart("reading"),),
        name="read_file",
    ),
    "bare tool call": ToolCallStarted("call_2", "Think", "think"),
    "tool update": ToolCallUpdated(
        "call_1",
        status="completed",
        title="Read a.py (3 lines)",
        content=(
            TextPart("ok"),
            DiffContent("/w/a.py", None, "new"),
            DiffContent("/w/b.py", "old", "new"),
            TerminalContent("term_1"),
        ),
        locations=(),
        raw_output={"lines": 3},
    ),
    "tool update, only status": ToolCallUpdated("call_1", status="failed"),
    "plan": PlanUpdated((PlanEntry("Read"), PlanEntry("Fix", "high", "in_progress"))),
    "usage": UsageUpdated(used=1200, size=200_000, cost_usd=0.01234567),
    "usage without cost": UsageUpdated(used=1, size=2),
}
CAPABLE_CLIENT_EVENTS: dict[str, TurnEvent] = {
    "compaction started": CompactionStarted("c1"),
    "compaction summary": CompactionSummaryChunk("c1", "So far"),
    "compaction done": CompactionFinished("c1", "completed", summary="So far", summarised=3),
    "compaction failed": CompactionFinished("c1", "failed", error="no model"),
    "notice": Notice("Retrying", "in 2 s", "warning"),
}
EXTRA_MODELS = {
    "compaction_update": "CompactionUpdate",
    "compaction_summary_chunk": "CompactionSummaryChunk",
    "notice": "NoticeUpdate",
}


def canonical(update: dict[str, Any]) -> dict[str, Any]:
    """The update validated by its model and dumped as the models send it."""
    extra = EXTRA_MODELS.get(update["sessionUpdate"])
    if extra is not None:
        return schema.dump(getattr(schema, extra).model_validate(update))
    if update["sessionUpdate"] == "tool_call":
        return schema.dump(schema.ToolCallStart.model_validate(update))  # with `name`
    notification = SessionNotification.model_validate({"sessionId": "s", "update": update})
    return schema.dump(notification)["update"]


@pytest.mark.parametrize("name", EVENTS)
def test_each_update_is_what_the_schema_models_send(name: str) -> None:
    update = session_update(EVENTS[name])
    assert update is not None
    assert canonical(update) == update
    assert_v1({"sessionId": "s", "update": update}, "SessionNotification", closed=True)


@pytest.mark.parametrize("name", CAPABLE_CLIENT_EVENTS)
def test_compaction_and_notice_updates_are_what_the_spec_models_send(name: str) -> None:
    update = session_update(CAPABLE_CLIENT_EVENTS[name], compaction=True, notices=True)
    assert update is not None
    assert canonical(update) == update


@pytest.mark.parametrize("name", CAPABLE_CLIENT_EVENTS)
def test_clients_without_those_capabilities_get_valid_messages_or_nothing(name: str) -> None:
    update = session_update(CAPABLE_CLIENT_EVENTS[name])
    if update is not None:
        assert update["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")
        assert canonical(update) == update


def test_a_terminal_stream_for_zed_is_a_valid_tool_call_with_its_meta() -> None:
    started = ToolCallUpdated(
        "call_1", status="in_progress", terminal=TerminalStream("t1", cwd="/w", output="hi\n")
    )
    update = session_update(started, terminal_meta=True)
    assert update is not None
    meta = update.pop("_meta")
    assert meta["terminal_info"] == {"terminal_id": "t1", "cwd": "/w"}
    assert meta["terminal_output"] == {"terminal_id": "t1", "data": "hi\n"}
    assert canonical(update) == update
