"""What a session log holds: the record vocabulary and its one-line JSON codec.

A log is one record per line. Every line is a JSON object carrying the format version
`v` and a `kind` tag; parts, events and tool contents inside it are tagged by `kind` too:

    {"v":1,"kind":"header","session_id":"s1","cwd":"/w","additional_roots":[],...}
    {"v":1,"kind":"message","message":{"role":"user","parts":[{"kind":"text","text":"hi"}]}}
    {"v":1,"kind":"event","event":{"kind":"message_chunk","text":"Hello","message_id":"m2"}}

Fields whose value is None are left out, and read back as None.

`decode` is the one reader: it upgrades a line of an older version to the current one
through `UPGRADES` (numbered steps applied in order, as simonw/llm's migrations), then
builds the record by hand (plain `json` and dataclasses: a long log must load fast). A line
from a newer version, of an unknown kind, or of the wrong shape raises `RecordError`.

Adding a kind: one frozen dataclass with a `kind` and one `_Codec` entry in `_CODECS`.
Changing a kind's shape: bump `RECORD_VERSION` and register the step from the previous
version in `UPGRADES`; old lines stay as they are on disk and are upgraded on every read.
`tests/sessions/fixtures/store-v1.jsonl` must keep loading to the same records.

No ACP types here, and no secrets: the store redacts configured secret values from every
line it writes (see `store.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Final, Literal, TypeAlias, cast, get_args

from ..messages import (
    CommandInfo,
    CommandsChanged,
    CompactionFinished,
    CompactionStarted,
    CompactionStatus,
    CompactionSummaryChunk,
    DiffContent,
    DocumentPart,
    ImagePart,
    Location,
    Message,
    MessageChunk,
    Notice,
    NoticeSeverity,
    Part,
    PlanEntry,
    PlanPriority,
    PlanStatus,
    PlanUpdated,
    ResourceLinkPart,
    Role,
    SessionInfoChanged,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThinkingPart,
    ThoughtChunk,
    ToolCallPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    ToolKind,
    ToolResultPart,
    ToolStatus,
    TurnEvent,
    UsageUpdated,
    UserMessageChunk,
)
from .errors import RecordError

RECORD_VERSION: Final = 1

Json: TypeAlias = dict[str, Any]
Upgrade: TypeAlias = Callable[[Json], Json]

UPGRADES: Mapping[int, Upgrade] = {}
"""`UPGRADES[n]` turns a record payload of version n into one of version n + 1 (it may
change any field, even `kind`; `v` is set by the caller). Empty: version 1 is the first.

To change a shape: bump `RECORD_VERSION` to n + 1, add `n: _upgrade_n_to_n_plus_1` here,
and check in a `store-v<n+1>.jsonl` fixture beside the older ones."""


def utc_now() -> str:
    """Now, as the store writes times: ISO 8601 in UTC, microseconds, `Z` suffix."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The first line of every log."""

    kind: ClassVar[Literal["header"]] = "header"
    session_id: str
    cwd: str
    additional_roots: tuple[str, ...] = ()
    created_at: str = ""
    """ISO 8601, UTC (`utc_now()`)."""
    forked_from: str | None = None


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One entry of the model-facing history, complete, in order."""

    kind: ClassVar[Literal["message"]] = "message"
    message: Message
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """What the user saw, replayed on `session/load` (chunks merged by the writer)."""

    kind: ClassVar[Literal["event"]] = "event"
    event: TurnEvent


@dataclass(frozen=True, slots=True)
class ChoiceRecord:
    """New values of the session's choices; None leaves a choice as it was."""

    kind: ClassVar[Literal["choice"]] = "choice"
    model: str | None = None
    mode: str | None = None
    thought_level: str | None = None


@dataclass(frozen=True, slots=True)
class PermissionsRecord:
    """A snapshot of the "always" answers (`PermissionMemory.to_json`)."""

    kind: ClassVar[Literal["permissions"]] = "permissions"
    allowed: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RootsRecord:
    """The roots the session works in from here on (each time it is opened in new ones):
    the "always" answers of the permissions records that follow were given in them."""

    kind: ClassVar[Literal["roots"]] = "roots"
    cwd: str
    additional_roots: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """The usage meter after a model call: the session's cost and the last reading."""

    kind: ClassVar[Literal["usage"]] = "usage"
    cost_usd: float | None = None
    used: int | None = None
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class TitleRecord:
    kind: ClassVar[Literal["title"]] = "title"
    title: str


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """The first `replaced` messages of the full history (every `MessageRecord` so far)
    were summarised as `summary`: the working context is the summary, then the rest."""

    kind: ClassVar[Literal["compaction"]] = "compaction"
    compaction_id: str
    summary: Message
    replaced: int


@dataclass(frozen=True, slots=True)
class TurnEndRecord:
    kind: ClassVar[Literal["turn_end"]] = "turn_end"
    stop_reason: str
    at: str
    """ISO 8601, UTC."""


Record: TypeAlias = (
    SessionHeader
    | MessageRecord
    | EventRecord
    | ChoiceRecord
    | PermissionsRecord
    | RootsRecord
    | UsageRecord
    | TitleRecord
    | CompactionRecord
    | TurnEndRecord
)


# --- the codec -------------------------------------------------------------------------------


def encode(record: Record) -> str:
    """One JSON line (no newline inside or at the end) carrying `v` and `kind`.

    Raises `RecordError` for a value JSON cannot hold (raw tool input or output that is
    not JSON, a NaN cost): nothing is written then.
    """
    codec = _BY_TYPE.get(type(record))
    if codec is None:
        raise RecordError(f"not a record: {type(record).__name__}")
    payload: Json = {"v": RECORD_VERSION, "kind": codec.kind}
    payload.update(codec.to_json(record))
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise RecordError(f"cannot encode a {codec.kind} record: {exc}") from None


def decode(
    line: str | bytes,
    *,
    upgrades: Mapping[int, Upgrade] = UPGRADES,
    version: int = RECORD_VERSION,
) -> Record:
    """The record one line holds, upgraded from its version to `version` first.

    `upgrades` and `version` exist for tests of the upgrade machinery; callers keep the
    defaults.
    """
    try:
        payload = json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
    except (ValueError, RecursionError) as exc:  # JSON, UTF-8, absurd nesting
        raise RecordError(f"not a JSON line: {str(exc)[:200]}") from None
    if type(payload) is not dict:
        raise RecordError("not a JSON object")
    found = payload.get("v")
    if found != version or type(found) is not int:
        payload = upgrade(payload, upgrades=upgrades, version=version)
    kind = payload.get("kind")
    codec = _CODECS.get(kind) if isinstance(kind, str) else None
    if codec is None:
        raise RecordError(f"unknown record kind: {kind!r}")
    try:
        return codec.from_json(payload)
    except RecordError as exc:
        raise RecordError(f"{kind} record: {exc}") from None
    except KeyError as exc:
        raise RecordError(f"{kind} record: missing field {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"{kind} record: {exc}") from None


def upgrade(
    payload: Json, *, upgrades: Mapping[int, Upgrade] = UPGRADES, version: int = RECORD_VERSION
) -> Json:
    """`payload` brought from its own version `v` to `version`, one step at a time."""
    found = payload.get("v")
    if not isinstance(found, int) or isinstance(found, bool):
        raise RecordError(f"no format version in the record (v = {found!r})")
    if found > version:
        raise RecordError(
            f"record format version {found} is newer than the newest this acp-agent reads "
            f"({version}): upgrade acp-agent to load this session"
        )
    while found < version:
        step = upgrades.get(found)
        if step is None:
            raise RecordError(f"no upgrade from record format version {found} to {found + 1}")
        try:
            payload = step(payload)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RecordError(f"upgrading a version {found} record failed: {exc!r}") from None
        if type(payload) is not dict:
            raise RecordError(f"the upgrade from version {found} returned no object")
        found += 1
        payload["v"] = found
    return payload


# --- field readers: the wrong type is a RecordError, a missing key a KeyError ---------------


def _str(d: Json, key: str) -> str:
    value = d[key]
    if type(value) is str:
        return value
    raise _wrong(key, "a string", value)


def _opt_str(d: Json, key: str) -> str | None:
    value = d.get(key)
    if value is None or type(value) is str:
        return value
    raise _wrong(key, "a string", value)


def _int(d: Json, key: str) -> int:
    value = d[key]
    if type(value) is int:
        return value
    raise _wrong(key, "an integer", value)


def _opt_int(d: Json, key: str) -> int | None:
    value = d.get(key)
    if value is None or type(value) is int:
        return value
    raise _wrong(key, "an integer", value)


def _opt_float(d: Json, key: str) -> float | None:
    value = d.get(key)
    if value is None or type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _wrong(key, "a number", value)


def _bool(d: Json, key: str, default: bool = False) -> bool:
    value = d.get(key, default)
    if type(value) is bool:
        return value
    raise _wrong(key, "true or false", value)


def _obj(d: Json, key: str) -> Json:
    value = d[key]
    if type(value) is dict:
        return value
    raise _wrong(key, "an object", value)


def _opt_obj(d: Json, key: str) -> Json | None:
    value = d.get(key)
    if value is None or type(value) is dict:
        return value
    raise _wrong(key, "an object", value)


def _list(d: Json, key: str) -> list[Any]:
    value = d[key]
    if type(value) is list:
        return value
    raise _wrong(key, "a list", value)


def _strings(d: Json, key: str) -> tuple[str, ...]:
    items = _list(d, key)
    if all(type(item) is str for item in items):
        return tuple(items)
    raise _wrong(key, "a list of strings", items)


def _choice(d: Json, key: str, allowed: frozenset[str]) -> str:
    value = _str(d, key)
    if value in allowed:
        return value
    raise _wrong(key, f"one of {sorted(allowed)}", value)


def _opt_choice(d: Json, key: str, allowed: frozenset[str]) -> str | None:
    return None if d.get(key) is None else _choice(d, key, allowed)


def _wrong(key: str, expected: str, value: object) -> RecordError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return RecordError(f"field {key!r} should be {expected}, not {shown}")


def _put(d: Json, key: str, value: object) -> None:
    """Set `key` unless `value` is None (None fields are left out of a line)."""
    if value is not None:
        d[key] = value


_ROLES: Final = frozenset(get_args(Role))
_TOOL_KINDS: Final = frozenset(get_args(ToolKind))
_TOOL_STATUSES: Final = frozenset(get_args(ToolStatus))
_PLAN_PRIORITIES: Final = frozenset(get_args(PlanPriority))
_PLAN_STATUSES: Final = frozenset(get_args(PlanStatus))
_COMPACTION_STATUSES: Final = frozenset(get_args(CompactionStatus))
_NOTICE_SEVERITIES: Final = frozenset(get_args(NoticeSeverity))


def _tagged(d: Json, table: Mapping[str, Callable[[Json], Any]], what: str) -> Any:
    if type(d) is not dict:
        raise RecordError(f"{what} should be an object, not {type(d).__name__}")
    reader = table.get(d.get("kind"))  # type: ignore[arg-type]
    if reader is None:
        raise RecordError(f"unknown {what} kind: {d.get('kind')!r}")
    return reader(d)


# --- parts and messages ----------------------------------------------------------------------


def part_to_json(part: Part) -> Json:
    match part:
        case TextPart(text=text):
            return {"kind": "text", "text": text}
        case ImagePart(data=data, mime_type=mime_type):
            return {"kind": "image", "data": data, "mime_type": mime_type}
        case DocumentPart(data=data, mime_type=mime_type, name=name):
            return {"kind": "document", "data": data, "mime_type": mime_type, "name": name}
        case ResourceLinkPart(uri=uri, name=name, mime_type=mime_type, context=context):
            link: Json = {"kind": "resource_link", "uri": uri, "name": name}
            _put(link, "mime_type", mime_type)
            if context is not None:
                link["context"] = [part_to_json(item) for item in context]
            return link
        case ThinkingPart(text=text, provider_data=provider_data):
            d: Json = {"kind": "thinking", "text": text}
            _put(d, "provider_data", provider_data)
            return d
        case ToolCallPart(id=call_id, name=name, arguments=arguments):
            return {"kind": "tool_call", "id": call_id, "name": name, "arguments": arguments}
        case ToolResultPart(tool_call_id=tool_call_id, content=content, is_error=is_error):
            return {
                "kind": "tool_result",
                "tool_call_id": tool_call_id,
                "content": [part_to_json(item) for item in content],
                "is_error": is_error,
            }
    raise RecordError(f"not a message part: {type(part).__name__}")


def _text_part(d: Json) -> TextPart:
    return TextPart(_str(d, "text"))


def _image_part(d: Json) -> ImagePart:
    return ImagePart(_str(d, "data"), _str(d, "mime_type"))


def _media(d: Json) -> TextPart | ImagePart:
    part = _tagged(d, _PART_READERS, "part")
    if isinstance(part, TextPart | ImagePart):
        return part
    raise RecordError(f"a {d['kind']} part cannot appear here, only text or image")


def _mentioned(d: Json) -> TextPart | ImagePart | DocumentPart:
    part = _tagged(d, _PART_READERS, "part")
    if isinstance(part, TextPart | ImagePart | DocumentPart):
        return part
    raise RecordError(f"a {d['kind']} part cannot appear here, only text, image or document")


def _typed(d: Json) -> TextPart | ImagePart | ResourceLinkPart | DocumentPart:
    """A part of a user's prompt as they sent it (`UserMessageChunk`)."""
    part = _tagged(d, _PART_READERS, "part")
    if isinstance(part, TextPart | ImagePart | ResourceLinkPart | DocumentPart):
        return part
    raise RecordError(f"a {d['kind']} part is not part of a prompt")


def _resource_link(d: Json) -> ResourceLinkPart:
    context = d.get("context")
    if context is not None and type(context) is not list:
        raise _wrong("context", "a list", context)
    return ResourceLinkPart(
        _str(d, "uri"),
        _str(d, "name"),
        _opt_str(d, "mime_type"),
        None if context is None else tuple(_mentioned(item) for item in context),
    )


_PART_READERS: Final[Mapping[str, Callable[[Json], Part]]] = {
    "text": _text_part,
    "image": _image_part,
    "document": lambda d: DocumentPart(_str(d, "data"), _str(d, "mime_type"), _str(d, "name")),
    "resource_link": _resource_link,
    "thinking": lambda d: ThinkingPart(_str(d, "text"), _opt_obj(d, "provider_data")),
    "tool_call": lambda d: ToolCallPart(_str(d, "id"), _str(d, "name"), _obj(d, "arguments")),
    "tool_result": lambda d: ToolResultPart(
        _str(d, "tool_call_id"),
        tuple(_media(item) for item in _list(d, "content")),
        _bool(d, "is_error"),
    ),
}


def message_to_json(message: Message) -> Json:
    return {"role": message.role, "parts": [part_to_json(part) for part in message.parts]}


def message_from_json(d: Json) -> Message:
    if type(d) is not dict:
        raise RecordError(f"a message should be an object, not {type(d).__name__}")
    role = cast(Role, _choice(d, "role", _ROLES))
    return Message(role, [_tagged(item, _PART_READERS, "part") for item in _list(d, "parts")])


# --- turn events -----------------------------------------------------------------------------


def _content_to_json(item: ToolContent) -> Json:
    match item:
        case TextPart(text=text):
            return {"kind": "text", "text": text}
        case DiffContent(path=path, old_text=old_text, new_text=new_text):
            d: Json = {"kind": "diff", "path": path, "new_text": new_text}
            _put(d, "old_text", old_text)
            return d
        case TerminalContent(terminal_id=terminal_id):
            return {"kind": "terminal", "terminal_id": terminal_id}
    raise RecordError(f"not tool content: {type(item).__name__}")


_CONTENT_READERS: Final[Mapping[str, Callable[[Json], ToolContent]]] = {
    "text": _text_part,
    "diff": lambda d: DiffContent(_str(d, "path"), _opt_str(d, "old_text"), _str(d, "new_text")),
    "terminal": lambda d: TerminalContent(_str(d, "terminal_id")),
}


def _contents(items: list[Any]) -> tuple[ToolContent, ...]:
    return tuple(_tagged(item, _CONTENT_READERS, "tool content") for item in items)


def _location_to_json(location: Location) -> Json:
    d: Json = {"path": location.path}
    _put(d, "line", location.line)
    return d


def _locations(items: list[Any]) -> tuple[Location, ...]:
    return tuple(Location(_str(item, "path"), _opt_int(item, "line")) for item in items)


def _terminal_to_json(t: TerminalStream) -> Json:
    d: Json = {"terminal_id": t.terminal_id, "exited": t.exited}
    _put(d, "cwd", t.cwd)
    _put(d, "output", t.output)
    _put(d, "exit_code", t.exit_code)
    _put(d, "signal", t.signal)
    return d


def _terminal(d: Json) -> TerminalStream:
    return TerminalStream(
        _str(d, "terminal_id"),
        cwd=_opt_str(d, "cwd"),
        output=_opt_str(d, "output"),
        exited=_bool(d, "exited"),
        exit_code=_opt_int(d, "exit_code"),
        signal=_opt_str(d, "signal"),
    )


def event_to_json(event: TurnEvent) -> Json:
    d: Json
    match event:
        case MessageChunk(text=text, message_id=message_id):
            d = {"kind": "message_chunk", "text": text}
            _put(d, "message_id", message_id)
        case ThoughtChunk(text=text, message_id=message_id):
            d = {"kind": "thought_chunk", "text": text}
            _put(d, "message_id", message_id)
        case UserMessageChunk(part=part, message_id=message_id):
            d = {"kind": "user_message_chunk", "part": part_to_json(part)}
            _put(d, "message_id", message_id)
        case ToolCallStarted():
            d = {
                "kind": "tool_call_started",
                "id": event.id,
                "title": event.title,
                "tool_kind": event.kind,
                "status": event.status,
                "locations": [_location_to_json(loc) for loc in event.locations],
                "content": [_content_to_json(item) for item in event.content],
            }
            _put(d, "raw_input", event.raw_input)
            _put(d, "name", event.name)
        case ToolCallUpdated():
            d = {"kind": "tool_call_updated", "id": event.id}
            _put(d, "status", event.status)
            _put(d, "title", event.title)
            if event.content is not None:
                d["content"] = [_content_to_json(item) for item in event.content]
            if event.locations is not None:
                d["locations"] = [_location_to_json(loc) for loc in event.locations]
            _put(d, "raw_output", event.raw_output)
            if event.terminal is not None:
                d["terminal"] = _terminal_to_json(event.terminal)
        case PlanUpdated(entries=entries):
            d = {
                "kind": "plan_updated",
                "entries": [
                    {"content": e.content, "priority": e.priority, "status": e.status}
                    for e in entries
                ],
            }
        case UsageUpdated(used=used, size=size, cost_usd=cost_usd):
            d = {"kind": "usage_updated", "used": used, "size": size}
            _put(d, "cost_usd", cost_usd)
        case SessionInfoChanged(title=title, updated_at=updated_at):
            d = {"kind": "session_info_changed"}
            _put(d, "title", title)
            _put(d, "updated_at", updated_at)
        case CommandsChanged(commands=commands):
            d = {"kind": "commands_changed", "commands": [_command_to_json(c) for c in commands]}
        case CompactionStarted(compaction_id=compaction_id):
            d = {"kind": "compaction_started", "compaction_id": compaction_id}
        case CompactionSummaryChunk(compaction_id=compaction_id, text=text):
            d = {"kind": "compaction_summary_chunk", "compaction_id": compaction_id, "text": text}
        case CompactionFinished():
            d = {
                "kind": "compaction_finished",
                "compaction_id": event.compaction_id,
                "status": event.status,
                "summarised": event.summarised,
            }
            _put(d, "summary", event.summary)
            _put(d, "error", event.error)
            _put(d, "share", event.share)
        case Notice():
            # Live only: the recorder keeps none; encoded like every event all the same.
            d = {"kind": "notice", "title": event.title, "severity": event.severity}
            _put(d, "description", event.description)
            _put(d, "message_id", event.message_id)
        case _:
            raise RecordError(f"not a turn event: {type(event).__name__}")
    return d


def _command_to_json(command: CommandInfo) -> Json:
    d: Json = {"name": command.name, "description": command.description}
    _put(d, "hint", command.hint)
    return d


def _command(d: Json) -> CommandInfo:
    return CommandInfo(_str(d, "name"), _str(d, "description"), _opt_str(d, "hint"))


def _compaction_finished(d: Json) -> CompactionFinished:
    return CompactionFinished(
        _str(d, "compaction_id"),
        cast(CompactionStatus, _choice(d, "status", _COMPACTION_STATUSES)),
        summary=_opt_str(d, "summary"),
        error=_opt_str(d, "error"),
        summarised=_int(d, "summarised"),
        share=_opt_float(d, "share"),
    )


def _tool_call_started(d: Json) -> ToolCallStarted:
    return ToolCallStarted(
        _str(d, "id"),
        _str(d, "title"),
        cast(ToolKind, _choice(d, "tool_kind", _TOOL_KINDS)),
        cast(ToolStatus, _choice(d, "status", _TOOL_STATUSES)),
        raw_input=_opt_obj(d, "raw_input"),
        locations=_locations(_list(d, "locations")),
        content=_contents(_list(d, "content")),
        name=_opt_str(d, "name"),  # absent in records written before names were kept
    )


def _tool_call_updated(d: Json) -> ToolCallUpdated:
    terminal = _opt_obj(d, "terminal")
    return ToolCallUpdated(
        _str(d, "id"),
        status=cast("ToolStatus | None", _opt_choice(d, "status", _TOOL_STATUSES)),
        title=_opt_str(d, "title"),
        content=None if d.get("content") is None else _contents(_list(d, "content")),
        locations=None if d.get("locations") is None else _locations(_list(d, "locations")),
        raw_output=d.get("raw_output"),
        terminal=None if terminal is None else _terminal(terminal),
    )


def _plan_entry(d: Json) -> PlanEntry:
    return PlanEntry(
        _str(d, "content"),
        cast(PlanPriority, _choice(d, "priority", _PLAN_PRIORITIES)),
        cast(PlanStatus, _choice(d, "status", _PLAN_STATUSES)),
    )


_EVENT_READERS: Final[Mapping[str, Callable[[Json], TurnEvent]]] = {
    "message_chunk": lambda d: MessageChunk(_str(d, "text"), _opt_str(d, "message_id")),
    "thought_chunk": lambda d: ThoughtChunk(_str(d, "text"), _opt_str(d, "message_id")),
    "user_message_chunk": lambda d: UserMessageChunk(
        _typed(_obj(d, "part")), _opt_str(d, "message_id")
    ),
    "tool_call_started": _tool_call_started,
    "tool_call_updated": _tool_call_updated,
    "plan_updated": lambda d: PlanUpdated(tuple(_plan_entry(e) for e in _list(d, "entries"))),
    "usage_updated": lambda d: UsageUpdated(
        _int(d, "used"), _int(d, "size"), _opt_float(d, "cost_usd")
    ),
    "session_info_changed": lambda d: SessionInfoChanged(
        _opt_str(d, "title"), _opt_str(d, "updated_at")
    ),
    "commands_changed": lambda d: CommandsChanged(tuple(_command(c) for c in _list(d, "commands"))),
    "compaction_started": lambda d: CompactionStarted(_str(d, "compaction_id")),
    "compaction_summary_chunk": lambda d: CompactionSummaryChunk(
        _str(d, "compaction_id"), _str(d, "text")
    ),
    "compaction_finished": _compaction_finished,
    "notice": lambda d: Notice(
        _str(d, "title"),
        _opt_str(d, "description"),
        cast(NoticeSeverity, _choice(d, "severity", _NOTICE_SEVERITIES)),
        _opt_str(d, "message_id"),
    ),
}


def event_from_json(d: Json) -> TurnEvent:
    event: TurnEvent = _tagged(d, _EVENT_READERS, "event")
    return event


# --- the record table ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Codec:
    kind: str
    type: type[Any]
    to_json: Callable[[Any], Json]
    from_json: Callable[[Json], Record]


def _header_to_json(r: SessionHeader) -> Json:
    d: Json = {
        "session_id": r.session_id,
        "cwd": r.cwd,
        "additional_roots": list(r.additional_roots),
        "created_at": r.created_at,
    }
    _put(d, "forked_from", r.forked_from)
    return d


def _message_record_to_json(r: MessageRecord) -> Json:
    d: Json = {"message": message_to_json(r.message)}
    _put(d, "message_id", r.message_id)
    return d


def _choice_to_json(r: ChoiceRecord) -> Json:
    d: Json = {}
    _put(d, "model", r.model)
    _put(d, "mode", r.mode)
    _put(d, "thought_level", r.thought_level)
    return d


def _usage_to_json(r: UsageRecord) -> Json:
    d: Json = {"estimated": r.estimated}
    _put(d, "cost_usd", r.cost_usd)
    _put(d, "used", r.used)
    return d


_CODECS: Final[dict[str, _Codec]] = {
    codec.kind: codec
    for codec in (
        _Codec(
            "header",
            SessionHeader,
            _header_to_json,
            lambda d: SessionHeader(
                _str(d, "session_id"),
                _str(d, "cwd"),
                _strings(d, "additional_roots"),
                _str(d, "created_at"),
                _opt_str(d, "forked_from"),
            ),
        ),
        _Codec(
            "message",
            MessageRecord,
            _message_record_to_json,
            lambda d: MessageRecord(
                message_from_json(_obj(d, "message")), _opt_str(d, "message_id")
            ),
        ),
        _Codec(
            "event",
            EventRecord,
            lambda r: {"event": event_to_json(r.event)},
            lambda d: EventRecord(event_from_json(_obj(d, "event"))),
        ),
        _Codec(
            "choice",
            ChoiceRecord,
            _choice_to_json,
            lambda d: ChoiceRecord(
                _opt_str(d, "model"), _opt_str(d, "mode"), _opt_str(d, "thought_level")
            ),
        ),
        _Codec(
            "permissions",
            PermissionsRecord,
            lambda r: {"allowed": list(r.allowed), "rejected": list(r.rejected)},
            lambda d: PermissionsRecord(_strings(d, "allowed"), _strings(d, "rejected")),
        ),
        _Codec(
            "roots",
            RootsRecord,
            lambda r: {"cwd": r.cwd, "additional_roots": list(r.additional_roots)},
            lambda d: RootsRecord(_str(d, "cwd"), _strings(d, "additional_roots")),
        ),
        _Codec(
            "usage",
            UsageRecord,
            _usage_to_json,
            lambda d: UsageRecord(
                _opt_float(d, "cost_usd"), _opt_int(d, "used"), _bool(d, "estimated")
            ),
        ),
        _Codec(
            "title",
            TitleRecord,
            lambda r: {"title": r.title},
            lambda d: TitleRecord(_str(d, "title")),
        ),
        _Codec(
            "compaction",
            CompactionRecord,
            lambda r: {
                "compaction_id": r.compaction_id,
                "summary": message_to_json(r.summary),
                "replaced": r.replaced,
            },
            lambda d: CompactionRecord(
                _str(d, "compaction_id"),
                message_from_json(_obj(d, "summary")),
                _int(d, "replaced"),
            ),
        ),
        _Codec(
            "turn_end",
            TurnEndRecord,
            lambda r: {"stop_reason": r.stop_reason, "at": r.at},
            lambda d: TurnEndRecord(_str(d, "stop_reason"), _str(d, "at")),
        ),
    )
}
_BY_TYPE: Final[dict[type[Any], _Codec]] = {codec.type: codec for codec in _CODECS.values()}

RECORD_KINDS: Final = frozenset(_CODECS)

__all__ = [
    "RECORD_KINDS",
    "RECORD_VERSION",
    "UPGRADES",
    "ChoiceRecord",
    "CompactionRecord",
    "EventRecord",
    "MessageRecord",
    "PermissionsRecord",
    "Record",
    "RootsRecord",
    "SessionHeader",
    "TitleRecord",
    "TurnEndRecord",
    "Upgrade",
    "UsageRecord",
    "decode",
    "encode",
    "event_from_json",
    "event_to_json",
    "message_from_json",
    "message_to_json",
    "part_to_json",
    "upgrade",
    "utc_now",
]
