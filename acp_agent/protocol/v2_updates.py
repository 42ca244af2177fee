"""Turn events -> v2 `session/update` payloads (ACP v2 Preview), as plain JSON.

What differs from v1 (`updates.py`):

- every message chunk names its message (`messageId` is required in v2);
- `tool_call_update` is the only tool-call shape: the first one for an id creates the call;
- a diff is a structured change list plus a `git_patch`, not old and new text;
- a local command's output goes to an agent-owned display terminal: `terminal_update`
  (opened, exited) and base64 `terminal_output_chunk`s, referenced by `terminal` content;
- plans are always `plan_update` / `plan_removed`, slash commands carry `type`s;
- every client understands notices, compaction and subagents, so no v1 fallback is needed:
  v2 clients have no capability that changes what a session update looks like.

Notices, compaction, usage, session info, subagents and plans have the same shape as for a
v1 client that opted in to all of them, so they come from `updates.session_update`.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..messages import (
    CommandInfo,
    CommandsChanged,
    DiffContent,
    DocumentPart,
    ImagePart,
    Location,
    MessageChunk,
    ResourceLinkPart,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    TurnEvent,
    TurnStopReason,
    UserMessageChunk,
)
from ..rpc.errors import RpcError
from .handshake import ClientCapabilities
from .updates import only_terminal, prompt_block, session_update

JsonObject = dict[str, Any]
UserPart: TypeAlias = TextPart | ImagePart | ResourceLinkPart | DocumentPart

SessionState: TypeAlias = Literal["running", "requires_action", "idle"]
FINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
StopReason: TypeAlias = TurnStopReason | Literal["error"]


@dataclass(frozen=True, slots=True)
class BackgroundTerminal:
    terminal_id: str


@dataclass(frozen=True, slots=True)
class BackgroundToolCall:
    tool_call_id: str


@dataclass(frozen=True, slots=True)
class BackgroundSubagent:
    session_id: str


BackgroundWork: TypeAlias = BackgroundTerminal | BackgroundToolCall | BackgroundSubagent


def session_updates_v2(event: TurnEvent, capabilities: ClientCapabilities) -> list[JsonObject]:
    """The update payloads for one event, in the order they are to be sent.

    Most events are one payload; a report of a local command's terminal can be more (it
    opens, then the call shows it; output and exit in one report). `capabilities`
    is taken for symmetry with v1: no v2 client capability changes a session update.
    """
    match event:
        case MessageChunk(text=text, message_id=message_id):
            return [_message("agent_message", prompt_block(TextPart(text)), message_id)]
        case ThoughtChunk(text=text, message_id=message_id):
            return [_message("agent_thought", prompt_block(TextPart(text)), message_id)]
        case UserMessageChunk(part=part, message_id=message_id):
            return [_message("user_message", prompt_block(part), message_id)]
        case ToolCallStarted():
            return [_tool_call_created(event)]
        case ToolCallUpdated(terminal=TerminalStream() as stream):
            return _terminal_updates(event, stream)
        case ToolCallUpdated():
            return [_tool_call_changed(event, event.content)]
        case CommandsChanged(commands=commands):
            return [
                {
                    "sessionUpdate": "available_commands_update",
                    "availableCommands": [_command(command) for command in commands],
                }
            ]
    payload = session_update(event, compaction=True, notices=True, subagents=True, plans=True)
    return [] if payload is None else [payload]


def _command(command: CommandInfo) -> JsonObject:
    hint = None if command.hint is None else {"type": "text", "hint": command.hint}
    return _without_none(
        type="command", name=command.name, description=command.description, input=hint
    )


def session_update_v2(event: TurnEvent, capabilities: ClientCapabilities) -> JsonObject | None:
    """The one update payload for an event, or None when there is none.

    Raises ValueError for an event that makes several payloads (see `session_updates_v2`, which
    a sender of every event kind should call): dropping one would lose what the user sees.
    """
    payloads = session_updates_v2(event, capabilities)
    if len(payloads) > 1:
        raise ValueError("this event makes several updates: send session_updates_v2(...)")
    return payloads[0] if payloads else None


def user_message(message_id: str, parts: Sequence[UserPart]) -> JsonObject:
    """The whole user message as inserted (`session/prompt` answers with its id)."""
    return {
        "sessionUpdate": "user_message",
        "messageId": message_id,
        "content": [prompt_block(part) for part in parts],
    }


def state_update(
    state: SessionState,
    stop_reason: StopReason | None = None,
    error: RpcError | None = None,
    background: Sequence[BackgroundWork] | None = None,
) -> JsonObject:
    """The session's foreground state. `stop_reason` (and `error`, for `error`) only when
    going idle ends foreground work; `background`: the complete list of work running on
    its own (None: not reported, which is not the same as `[]`, nothing running)."""
    if stop_reason is not None and state != "idle":
        raise ValueError(f"a stop reason goes with idle, not {state}")
    if error is not None and stop_reason != "error":
        raise ValueError("error details go with the stop reason error")
    update: JsonObject = {"sessionUpdate": "state_update", "state": state}
    if stop_reason is not None:
        update["stopReason"] = stop_reason
    if error is not None:
        update["error"] = error.to_dict()
    if background is not None:
        update["background"] = [_background(work) for work in background]
    return update


def replay_complete() -> JsonObject:
    """Sent once after a `session/resume` replay: everything after it is live."""
    return {"sessionUpdate": "replay_complete"}


_CHUNKED_MESSAGES = {
    "user_message_chunk": "user_message",
    "agent_message_chunk": "agent_message",
    "agent_thought_chunk": "agent_thought",
}


def message_reset(update: JsonObject) -> JsonObject | None:
    """For a message chunk, the whole-message upsert that empties that message, else None.

    Chunks append to what the client holds under the `messageId`; a client that saw the
    message live and now asks for a replay would show its text twice unless the replay
    empties it first (`content: []` replaces everything accumulated)."""
    kind = _CHUNKED_MESSAGES.get(str(update.get("sessionUpdate")))
    if kind is None or "messageId" not in update:
        return None
    return {"sessionUpdate": kind, "messageId": update["messageId"], "content": []}


def _background(work: BackgroundWork) -> JsonObject:
    match work:
        case BackgroundTerminal(terminal_id=terminal_id):
            return {"type": "terminal", "terminalId": terminal_id}
        case BackgroundToolCall(tool_call_id=tool_call_id):
            return {"type": "tool_call", "toolCallId": tool_call_id}
        case BackgroundSubagent(session_id=session_id):
            return {"type": "subagent", "sessionId": session_id}


# --- messages ------------------------------------------------------------------------------


def _message(kind: str, block: JsonObject, message_id: str | None) -> JsonObject:
    """A chunk of the message `message_id` names. An event without an id is a whole message
    (every producer sends such text in one piece, and records before ids kept one run each):
    it becomes a `kind` upsert under an id derived from its content, so the same record
    replayed names the same message, and sending it twice shows it once."""
    if message_id is not None:
        return {"sessionUpdate": f"{kind}_chunk", "messageId": message_id, "content": block}
    return {"sessionUpdate": kind, "messageId": _derived_id(kind, block), "content": [block]}


def _derived_id(kind: str, block: JsonObject) -> str:
    digest = hashlib.sha256(json.dumps([kind, block], sort_keys=True).encode("utf-8"))
    return f"{kind}-{digest.hexdigest()[:24]}"


# --- tool calls ----------------------------------------------------------------------------


def _tool_call_created(event: ToolCallStarted) -> JsonObject:
    """The first `tool_call_update` for the id: it creates the call, with all it has."""
    return _without_none(
        sessionUpdate="tool_call_update",
        toolCallId=event.id,
        title=event.title,
        kind=event.kind,
        status=event.status,
        rawInput=event.raw_input,
        content=tool_contents(event.content) or None,
        locations=locations(event.locations) or None,
        name=event.name,
    )


def _tool_call_changed(event: ToolCallUpdated, content: Sequence[ToolContent] | None) -> JsonObject:
    """The fields that changed (`content` the call shows now); an empty list is sent: it
    clears the collection. A running call the user may cancel says so; a final status
    withdraws that (`null`)."""
    update = _without_none(
        sessionUpdate="tool_call_update",
        toolCallId=event.id,
        status=event.status,
        title=event.title,
        rawOutput=event.raw_output,
        content=None if content is None else tool_contents(content),
        locations=None if event.locations is None else locations(event.locations),
    )
    if event.cancellable:
        update["capabilities"] = {"cancel": {}}
    elif event.status in FINAL_STATUSES:
        update["capabilities"] = None
    return update


def locations(locations: Sequence[Location]) -> list[JsonObject]:
    # v2 counts lines from 1: a line before that says nothing, so the path stands alone.
    return [
        _without_none(path=loc.path, line=loc.line if loc.line and loc.line > 0 else None)
        for loc in locations
    ]


def tool_contents(content: Sequence[ToolContent]) -> list[JsonObject]:
    return [_tool_content(item) for item in content]


def _tool_content(content: ToolContent) -> JsonObject:
    match content:
        case TextPart():
            return {"type": "content", "content": prompt_block(content)}
        case DiffContent():
            return _diff(content)
        case TerminalContent(terminal_id=terminal_id):
            return {"type": "terminal", "terminalId": terminal_id}


# --- display terminals ---------------------------------------------------------------------


def _terminal_updates(event: ToolCallUpdated, stream: TerminalStream) -> list[JsonObject]:
    """A local command's terminal: opened (with its cwd), its output, its exit, in that
    order, with the tool call's own changes once the terminal exists. An opening shows the
    terminal in the call unless the event says what the call shows."""
    updates: list[JsonObject] = []
    opened = stream.cwd is not None
    if opened:
        opening = _without_none(
            sessionUpdate="terminal_update",
            terminalId=stream.terminal_id,
            command=stream.command,
            cwd=stream.cwd,
            capabilities={"cancel": {}} if stream.stoppable else None,
        )
        updates.append(opening)
    if opened or not only_terminal(event):
        shown = (TerminalContent(stream.terminal_id),) if opened else None
        content = shown if event.content is None else event.content
        updates.append(_tool_call_changed(event, content))
    if stream.output:
        updates.append(
            {
                "sessionUpdate": "terminal_output_chunk",
                "terminalId": stream.terminal_id,
                # The bytes as the command wrote them; the stream holds them decoded.
                "data": base64.b64encode(stream.output.encode("utf-8", "replace")).decode(),
            }
        )
    if stream.exited:
        exit_status = _without_none(exitCode=stream.exit_code, signal=stream.signal)
        updates.append(
            {
                "sessionUpdate": "terminal_update",
                "terminalId": stream.terminal_id,
                "exitStatus": exit_status,
                "capabilities": None,  # it cannot be stopped any more
            }
        )
    return updates


# --- diffs ---------------------------------------------------------------------------------


def _diff(diff: DiffContent) -> JsonObject:
    """A file's change: what happened to which path (for clients that do not read patches)
    and the change as a `git_patch` with absolute paths, when there is text to show."""
    operation = "add" if diff.old_text is None else "modify"
    payload: JsonObject = {
        "type": "diff",
        "changes": [{"operation": operation, "path": diff.path, "fileType": "text"}],
    }
    patch = git_patch(diff.path, diff.old_text, diff.new_text)
    if patch:
        payload["patch"] = {"format": "git_patch", "text": patch}
    return payload


def git_patch(path: str, old_text: str | None, new_text: str) -> str:
    """One `diff --git` section as v2 asks for it: the absolute path on both sides, no
    `a/` `b/` prefixes, `/dev/null` for the missing side of a new file. Empty when nothing
    changed."""
    old_lines = [] if old_text is None else _lines(old_text)
    hunks = list(difflib.unified_diff(old_lines, _lines(new_text), n=3))[2:]
    if old_text is not None and not hunks:
        return ""
    name = _git_quoted(path)
    tab = "\t" if " " in name else ""  # as git marks a path's end when it holds a space
    header = [f"diff --git {name} {name}\n"]
    if old_text is None:
        header.append("new file mode 100644\n")
        if not hunks:
            return "".join(header)
    header += [f"--- {'/dev/null' if old_text is None else name}{tab}\n", f"+++ {name}{tab}\n"]
    return "".join(header) + "".join(_git_line(line) for line in hunks)


def _lines(text: str) -> list[str]:
    """Lines as git counts them: split at `\\n` only, each keeping it (the last may not)."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _git_line(line: str) -> str:
    if line.endswith("\n"):
        return line
    return line + "\n\\ No newline at end of file\n"


_GIT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n"}
_GIT_ESCAPES |= {"\v": "\\v", "\f": "\\f", "\r": "\\r"}


def _git_quoted(path: str) -> str:
    """The path as git writes it in a patch: in double quotes, with C escapes and octal
    bytes, when it holds a quote, a backslash, a control or a non-ASCII character."""
    if all(" " <= ch < "\x7f" and ch not in '"\\' for ch in path):
        return path
    quoted = []
    for ch in path:
        if ch in _GIT_ESCAPES:
            quoted.append(_GIT_ESCAPES[ch])
        elif " " <= ch < "\x7f":
            quoted.append(ch)
        else:
            quoted += [f"\\{byte:03o}" for byte in _path_bytes(ch)]
    return '"' + "".join(quoted) + '"'


def _path_bytes(ch: str) -> bytes:
    """A path character's bytes: a byte the file system name was not UTF-8 for comes back
    as that byte (paths are read with `surrogateescape`)."""
    try:
        return ch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return ch.encode("utf-8", "replace")


def _without_none(**fields: Any) -> JsonObject:
    """The fields that are set: an omitted field is "unchanged" in a v2 upsert."""
    return {name: value for name, value in fields.items() if value is not None}
