"""Turn events -> `session/update` payloads, built with the schema models and dumped strictly."""

from __future__ import annotations

from typing import Any

from ..messages import (
    DiffContent,
    Location,
    MessageChunk,
    PlanUpdated,
    SessionInfoChanged,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    TurnEvent,
    UsageUpdated,
    UserMessageChunk,
)
from . import schema as s


def session_update(event: TurnEvent, terminal_meta: bool = False) -> dict[str, Any] | None:
    """The update payload, or None when there is nothing this client would show.

    `terminal_meta`: the client renders Zed's `_meta.terminal_*` extension, which streams a
    local command's output into a display terminal.
    """
    if isinstance(event, ToolCallUpdated) and event.terminal is not None:
        if terminal_meta:
            return _with_terminal_meta(event, event.terminal)
        if _only_terminal(event):
            return None
    return dump(_update_model(event))


def _with_terminal_meta(event: ToolCallUpdated, stream: TerminalStream) -> dict[str, Any]:
    if stream.cwd is not None:
        # Zed opens a display terminal only from a `tool_call`; repeating one for a known id
        # updates that call.
        update = dump(
            s.ToolCallStart(
                session_update="tool_call",
                tool_call_id=event.id,
                title=event.title or "",
                kind="execute",
                status=event.status,
                content=None
                if event.content is None
                else [_tool_content(c) for c in event.content],
            )
        )
    else:
        update = dump(_update_model(event))
    update["_meta"] = _terminal_meta(stream)
    return update


def _only_terminal(event: ToolCallUpdated) -> bool:
    return (
        event.status is None
        and event.title is None
        and event.content is None
        and event.locations is None
        and event.raw_output is None
    )


def _terminal_meta(stream: TerminalStream) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if stream.cwd is not None:
        meta["terminal_info"] = {"terminal_id": stream.terminal_id, "cwd": stream.cwd}
    if stream.output:
        meta["terminal_output"] = {"terminal_id": stream.terminal_id, "data": stream.output}
    if stream.exited:
        meta["terminal_exit"] = {
            "terminal_id": stream.terminal_id,
            "exit_code": stream.exit_code,
            "signal": stream.signal,
        }
    return meta


def dump(model: s.BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _update_model(event: TurnEvent) -> s.BaseModel:
    match event:
        case MessageChunk(text=text, message_id=message_id):
            return s.AgentMessageChunk(
                session_update="agent_message_chunk",
                content=_text_block(text),
                message_id=message_id,
            )
        case ThoughtChunk(text=text, message_id=message_id):
            return s.AgentThoughtChunk(
                session_update="agent_thought_chunk",
                content=_text_block(text),
                message_id=message_id,
            )
        case UserMessageChunk(part=part, message_id=message_id):
            return s.UserMessageChunk(
                session_update="user_message_chunk",
                content=_text_block(part.text)
                if isinstance(part, TextPart)
                else s.ImageContentBlock(type="image", data=part.data, mime_type=part.mime_type),
                message_id=message_id,
            )
        case SessionInfoChanged(title=title, updated_at=updated_at):
            return s.SessionInfoUpdate(
                session_update="session_info_update", title=title, updated_at=updated_at
            )
        case ToolCallStarted():
            return s.ToolCallStart(
                session_update="tool_call",
                tool_call_id=event.id,
                title=event.title,
                kind=event.kind,
                status=event.status,
                raw_input=event.raw_input,
                locations=[_location(loc) for loc in event.locations] or None,
                content=[_tool_content(c) for c in event.content] or None,
            )
        case ToolCallUpdated():
            return s.ToolCallProgress(
                session_update="tool_call_update",
                tool_call_id=event.id,
                status=event.status,
                title=event.title,
                raw_output=event.raw_output,
                locations=None
                if event.locations is None
                else [_location(loc) for loc in event.locations],
                content=None
                if event.content is None
                else [_tool_content(c) for c in event.content],
            )
        case PlanUpdated(entries=entries):
            return s.AgentPlanUpdate(
                session_update="plan",
                entries=[
                    s.PlanEntry(content=e.content, priority=e.priority, status=e.status)
                    for e in entries
                ],
            )
        case UsageUpdated():
            cost = None
            if event.cost_usd is not None:
                cost = s.Cost(amount=round(event.cost_usd, 6), currency="USD")
            return s.UsageUpdate(
                session_update="usage_update", used=event.used, size=event.size, cost=cost
            )


def _text_block(text: str) -> s.TextContentBlock:
    return s.TextContentBlock(type="text", text=text)


def _location(location: Location) -> s.ToolCallLocation:
    return s.ToolCallLocation(path=location.path, line=location.line)


ToolCallContent = s.ContentToolCallContent | s.FileEditToolCallContent | s.TerminalToolCallContent


def _tool_content(content: ToolContent) -> ToolCallContent:
    match content:
        case TextPart(text=text):
            return s.ContentToolCallContent(type="content", content=_text_block(text))
        case DiffContent():
            return s.FileEditToolCallContent(
                type="diff", path=content.path, old_text=content.old_text, new_text=content.new_text
            )
        case TerminalContent(terminal_id=terminal_id):
            return s.TerminalToolCallContent(type="terminal", terminal_id=terminal_id)
