"""Turn events -> `session/update` payloads, as plain JSON (camelCase names, nothing None).

Built by hand rather than through the schema models: every streamed chunk passes here, and
the models cost half a second to import (see `schema`). The protocol tests validate each
payload against `acp.schema`, which therefore stays the authority on their shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import (
    BackgroundChanged,
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
    PlanUpdated,
    ResourceLinkPart,
    SessionInfoChanged,
    SubagentChanged,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolKind,
    ToolStatus,
    TurnEvent,
    UsageUpdated,
    UserMessageChunk,
    context_use,
)
from .plans import legacy_plan, plan_update

JsonObject = dict[str, Any]


def session_update(
    event: TurnEvent,
    terminal_meta: bool = False,
    *,
    compaction: bool = False,
    notices: bool = False,
    subagents: bool = False,
    plans: bool = False,
) -> JsonObject | None:
    """The update payload, or None when there is nothing this client would show.

    `terminal_meta`: the client renders Zed's `_meta.terminal_*` extension, which streams a
    local command's output into a display terminal. `compaction`: the client advertised
    `session.compaction`; other clients see a finished compaction as an agent message.
    `notices`: the client advertised `session.notices`; other clients see a notice as a
    line of its own (see `_notice_line`). `subagents`: the client advertised `subagents`;
    others are not told of child sessions (they see a subagent's work in its tool call).
    `plans`: the client advertised `plan`; it gets `plan_update` / `plan_removed`, others
    the legacy `plan` update.
    """
    if isinstance(event, BackgroundChanged):
        return None  # v1 has no background work list
    if isinstance(event, PlanUpdated):
        return plan_update(event) if plans else legacy_plan(event)
    if isinstance(event, SubagentChanged):
        return _subagent_update(event) if subagents else None
    if isinstance(event, Notice) and not notices:
        return _notice_line(event)
    if not compaction and isinstance(
        event, CompactionStarted | CompactionSummaryChunk | CompactionFinished
    ):
        return _compaction_message(event)
    if isinstance(event, ToolCallUpdated) and event.terminal is not None:
        if terminal_meta:
            return _with_terminal_meta(event, event.terminal)
        if only_terminal(event):
            return None
    return _update(event)


def _compaction_message(
    event: CompactionStarted | CompactionSummaryChunk | CompactionFinished,
) -> JsonObject | None:
    """A finished compaction as a short agent message, for clients without
    `session.compaction` (its progress and summary are not shown to them)."""
    if not isinstance(event, CompactionFinished):
        return None
    match event.status:
        case "completed":
            used = _context_used(event)
            count = event.summarised
            plural = "" if count == 1 else "s"
            text = f"[Context compacted: {used}{count} earlier message{plural} summarised.]"
        case "failed":
            text = f"[Context compaction failed: {event.error}]"
        case _:
            return None
    return _chunk("agent_message_chunk", _text_block(text + "\n\n"), event.compaction_id)


def _context_used(event: CompactionFinished) -> str:
    """`3.1K of 1,000K tokens (0.3%) of the context window used; `, or the share alone (as
    older logs keep it), or nothing."""
    if event.used_tokens is not None and event.window is not None:
        return f"{context_use(event.used_tokens, event.window)} of the context window used; "
    if event.share is not None:
        return f"{event.share:.0%} of the context window used; "
    return ""


def _notice_line(notice: Notice) -> JsonObject:
    """A notice for clients without `session.notices`: `[title; description]` and a blank
    line, so consecutive notices never share a line (also where text is read as Markdown),
    in the thoughts, or in the agent message it belongs to."""
    title = _notice_title(notice)
    line = f"{title.rstrip('.')}; {notice.description}" if notice.description else title
    block = _text_block(f"[{line}]\n\n")
    if notice.message_id is not None:
        return _chunk("agent_message_chunk", block, notice.message_id)
    return _chunk("agent_thought_chunk", block, None)


def _notice_title(notice: Notice) -> str:
    """The spec's title: non-empty plain text on one line."""
    return " ".join(notice.title.split()) or "Notice"


def _with_terminal_meta(event: ToolCallUpdated, stream: TerminalStream) -> JsonObject:
    if stream.cwd is not None:
        # Zed opens a display terminal only from a `tool_call`; repeating one for a known id
        # updates that call.
        update = _without_none(
            sessionUpdate="tool_call",
            toolCallId=event.id,
            title=event.title or "",
            kind="execute",
            status=v1_status(event.status),
            content=None if event.content is None else _tool_contents(event.content),
        )
    else:
        update = _update(event)
    update["_meta"] = _terminal_meta(stream)
    return update


def only_terminal(event: ToolCallUpdated) -> bool:
    """The update reports a terminal and changes nothing else of the call."""
    return (
        event.status is None
        and event.title is None
        and event.content is None
        and event.locations is None
        and event.raw_output is None
    )


def _terminal_meta(stream: TerminalStream) -> JsonObject:
    meta: JsonObject = {}
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


def _update(event: TurnEvent) -> JsonObject:
    match event:
        case MessageChunk(text=text, message_id=message_id):
            return _chunk("agent_message_chunk", _text_block(text), message_id)
        case ThoughtChunk(text=text, message_id=message_id):
            return _chunk("agent_thought_chunk", _text_block(text), message_id)
        case UserMessageChunk(part=part, message_id=message_id):
            return _chunk("user_message_chunk", prompt_block(part), message_id)
        case CommandsChanged(commands=commands):
            return {
                "sessionUpdate": "available_commands_update",
                "availableCommands": [
                    _without_none(
                        name=command.name,
                        description=command.description,
                        input=None if command.hint is None else {"hint": command.hint},
                    )
                    for command in commands
                ],
            }
        case SessionInfoChanged(title=title, updated_at=updated_at):
            return _without_none(
                sessionUpdate="session_info_update", title=title, updatedAt=updated_at
            )
        case ToolCallStarted():
            announced = announced_tool_call(
                event.id,
                event.title,
                event.kind,
                event.raw_input,
                name=event.name,
                content=event.content,
                locations=event.locations,
            )
            return {"sessionUpdate": "tool_call", **announced, "status": event.status}
        case ToolCallUpdated():
            return _without_none(
                sessionUpdate="tool_call_update",
                toolCallId=event.id,
                status=v1_status(event.status),
                title=event.title,
                rawOutput=event.raw_output,
                locations=None
                if event.locations is None
                else [_location(loc) for loc in event.locations],
                content=None if event.content is None else _tool_contents(event.content),
            )
        case PlanUpdated():
            return legacy_plan(event)
        case CompactionStarted(compaction_id=compaction_id):
            return {
                "sessionUpdate": "compaction_update",
                "compactionId": compaction_id,
                "status": "in_progress",
            }
        case CompactionSummaryChunk(compaction_id=compaction_id, text=text):
            return {
                "sessionUpdate": "compaction_summary_chunk",
                "compactionId": compaction_id,
                "content": _text_block(text),
            }
        case CompactionFinished(compaction_id=compaction_id, summary=summary):
            return _without_none(
                sessionUpdate="compaction_update",
                compactionId=compaction_id,
                status=event.status,
                summary=None if summary is None else [_text_block(summary)],
                error=event.error,
            )
        case Notice(description=description, severity=severity):
            return _without_none(
                sessionUpdate="notice",
                severity=severity,
                title=_notice_title(event),
                description=description,
            )
        case UsageUpdated():
            cost = None
            if event.cost_usd is not None:
                cost = {"amount": round(event.cost_usd, 6), "currency": "USD"}
            return _without_none(
                sessionUpdate="usage_update", used=event.used, size=event.size, cost=cost
            )
    raise TypeError(f"not a turn event: {type(event).__name__}")


def _subagent_update(event: SubagentChanged) -> JsonObject:
    state: JsonObject = {"state": event.state}
    if event.stop_reason is not None:
        state["stopReason"] = event.stop_reason
    return {
        "sessionUpdate": "subagent_update",
        "sessionId": event.session_id,
        "title": event.title,
        # `session/cancel` with the child's id stops just the child's work.
        "capabilities": {"cancel": {}},
        "state": state,
    }


def _chunk(kind: str, content: JsonObject, message_id: str | None) -> JsonObject:
    return _without_none(sessionUpdate=kind, content=content, messageId=message_id)


def prompt_block(part: TextPart | ImagePart | ResourceLinkPart | DocumentPart) -> JsonObject:
    """A part of a user's prompt as the client sent it (a mention: its link)."""
    match part:
        case TextPart(text=text):
            return _text_block(text)
        case ImagePart(data=data, mime_type=mime_type):
            return {"type": "image", "data": data, "mimeType": mime_type}
        case ResourceLinkPart(uri=uri, name=name, mime_type=mime_type):
            return _without_none(type="resource_link", uri=uri, name=name, mimeType=mime_type)
        case DocumentPart(data=data, mime_type=mime_type, name=name):
            return {
                "type": "resource",
                "resource": {"uri": name, "blob": data, "mimeType": mime_type},
            }


def v1_status(status: ToolStatus | None) -> str | None:
    """v1 has no `cancelled` tool call: a call the user cancelled alone shows as failed."""
    return "failed" if status == "cancelled" else status


def _text_block(text: str) -> JsonObject:
    return {"type": "text", "text": text}


def _location(location: Location) -> JsonObject:
    return _without_none(path=location.path, line=location.line)


def _tool_content(content: ToolContent) -> JsonObject:
    match content:
        case TextPart(text=text):
            return {"type": "content", "content": _text_block(text)}
        case DiffContent():
            return _without_none(
                type="diff", path=content.path, oldText=content.old_text, newText=content.new_text
            )
        case TerminalContent(terminal_id=terminal_id):
            return {"type": "terminal", "terminalId": terminal_id}


def _tool_contents(content: Sequence[ToolContent]) -> list[JsonObject]:
    return [_tool_content(c) for c in content]


def announced_tool_call(
    tool_call_id: str,
    title: str,
    kind: ToolKind,
    raw_input: dict[str, Any] | None,
    *,
    name: str | None,
    content: Sequence[ToolContent],
    locations: Sequence[Location],
) -> JsonObject:
    """A tool call as the user first sees it: in its `tool_call` update, and in the
    permission request that asks for it (with what it will do: a diff, a command line)."""
    return _without_none(
        toolCallId=tool_call_id,
        title=title,
        kind=kind,
        rawInput=raw_input,
        name=name,
        content=_tool_contents(content) or None,
        locations=[_location(loc) for loc in locations] or None,
    )


def _without_none(**fields: Any) -> JsonObject:
    """An object of the fields that are set: the schema's optional fields are left out, as
    the models' dump (`exclude_none`) did. Values inside (`rawInput`) are kept as given."""
    return {name: value for name, value in fields.items() if value is not None}
