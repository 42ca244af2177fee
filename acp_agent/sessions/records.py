"""What a session log holds: the record vocabulary and its one-line JSON codec.

A log is one record per line. Every line is a JSON object carrying the format version
`v` and a `kind` tag; parts, events and tool contents inside it are tagged by `kind` too:

    {"v":1,"kind":"header","session_id":"s1","cwd":"/w","additional_roots":[],...}
    {"v":1,"kind":"message","message":{"role":"user","parts":[{"kind":"text","text":"hi"}]}}
    {"v":1,"kind":"event","event":{"kind":"message_chunk","text":"Hello","message_id":"m2"}}

Fields whose value is None are left out, and read back as None.

`decode` is the one reader: it upgrades a line of an older version to the current one
through `UPGRADES` (numbered steps applied in order, as simonw/llm's migrations), then
builds the record from its dataclass's field types (`codec.py`). A line from a newer
version, of an unknown kind, or of the wrong shape raises `RecordError`.

The record dataclasses below are the format: each declares its `kind` and its fields'
types, and the codec derives the line from them. The neutral types inside records
(`messages.py`) are tagged by the `kind` names in `PARTS`, `TOOL_CONTENTS` and `EVENTS`.

Adding a kind: one frozen dataclass with a `kind`, listed in `Record`.
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
from typing import Any, ClassVar, Final, Literal, TypeAlias, get_args

from ..messages import (
    BackgroundChanged,
    CommandsChanged,
    CompactionFinished,
    CompactionStarted,
    CompactionSummaryChunk,
    DiffContent,
    DocumentPart,
    EditorPromptMode,
    ImagePart,
    Message,
    MessageChunk,
    Notice,
    PlanUpdated,
    ResourceLinkPart,
    SessionInfoChanged,
    SubagentChanged,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThinkingPart,
    ThoughtChunk,
    ToolCallPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolResultPart,
    TurnEvent,
    UsageUpdated,
    UserMessageChunk,
)
from .codec import Codec, Family, Json
from .errors import RecordError

RECORD_VERSION: Final = 1

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
    origin: str | None = None
    """What opened it: `ORIGIN_RUN` for `acp-agent run`; None for an editor (and in logs
    written before origins were kept). Old lines read the same: no version bump."""


ORIGIN_RUN: Final = "run"


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
    speed: str | None = None


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
    """The session's title from here on (the first prompt's, then the title model's)."""

    kind: ClassVar[Literal["title"]] = "title"
    title: str
    chosen: bool | None = None
    """True: the user's (`session/set_title`), which no automatic title replaces; None in
    the automatic ones (and in logs written before). Old lines read the same."""


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """The session was archived (hidden from default listings) or brought back."""

    kind: ClassVar[Literal["archive"]] = "archive"
    archived: bool


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """The first `replaced` messages of the full history (every `MessageRecord` so far)
    were summarised as `summary`: the working context is the summary, then the rest."""

    kind: ClassVar[Literal["compaction"]] = "compaction"
    compaction_id: str
    summary: Message
    replaced: int


@dataclass(frozen=True, slots=True)
class EditorPromptRecord:
    """The editor's system prompt for the session from here on (replayed on load)."""

    kind: ClassVar[Literal["editor_prompt"]] = "editor_prompt"
    mode: EditorPromptMode
    text: str


@dataclass(frozen=True, slots=True)
class TurnEndRecord:
    kind: ClassVar[Literal["turn_end"]] = "turn_end"
    stop_reason: str
    """The prompt's stop reason, or `TURN_FAILED` when it answered an error."""
    at: str
    """ISO 8601, UTC."""
    error: str | None = None
    """`TURN_FAILED`: what failed, as the user reads it. Old lines read the same (None):
    no version bump."""


TURN_FAILED: Final = "failed"


Record: TypeAlias = (
    SessionHeader
    | MessageRecord
    | EventRecord
    | ChoiceRecord
    | PermissionsRecord
    | RootsRecord
    | UsageRecord
    | TitleRecord
    | ArchiveRecord
    | CompactionRecord
    | EditorPromptRecord
    | TurnEndRecord
)


# --- the tags of the neutral types inside records --------------------------------------------

PARTS: Final[Mapping[type[Any], str]] = {
    TextPart: "text",
    ImagePart: "image",
    DocumentPart: "document",
    ResourceLinkPart: "resource_link",
    ThinkingPart: "thinking",
    ToolCallPart: "tool_call",
    ToolResultPart: "tool_result",
}
TOOL_CONTENTS: Final[Mapping[type[Any], str]] = {
    TextPart: "text",
    DiffContent: "diff",
    TerminalContent: "terminal",
}
EVENTS: Final[Mapping[type[Any], str]] = {
    MessageChunk: "message_chunk",
    ThoughtChunk: "thought_chunk",
    UserMessageChunk: "user_message_chunk",
    ToolCallStarted: "tool_call_started",
    ToolCallUpdated: "tool_call_updated",
    PlanUpdated: "plan_updated",
    UsageUpdated: "usage_updated",
    SessionInfoChanged: "session_info_changed",
    CommandsChanged: "commands_changed",
    CompactionStarted: "compaction_started",
    CompactionSummaryChunk: "compaction_summary_chunk",
    CompactionFinished: "compaction_finished",
    Notice: "notice",  # live only: the recorder keeps none, but it encodes like every event
    SubagentChanged: "subagent_changed",
    BackgroundChanged: "background_changed",  # live only, like a notice
}
_RECORD_TYPES: Final[dict[str, type[Record]]] = {cls.kind: cls for cls in get_args(Record)}

_CODEC: Final = Codec(
    (
        Family("part", PARTS),
        Family("tool content", TOOL_CONTENTS),
        Family("event", EVENTS),
        Family("record", {cls: kind for kind, cls in _RECORD_TYPES.items()}),
    ),
    # `kind` is the tag of the object the tool call's kind is stored in.
    renames={(ToolCallStarted, "kind"): "tool_kind"},
    # What the editor sent with a mention; `context` holds what was given the model.
    # Whether the user may stop a call or command now: true live only, never on replay.
    not_stored={
        (ResourceLinkPart, "embedded_text"),
        (ToolCallUpdated, "cancellable"),
        (TerminalStream, "stoppable"),
    },
)


# --- lines -----------------------------------------------------------------------------------


def encode(record: Record) -> str:
    """One JSON line (no newline inside or at the end) carrying `v` and `kind`.

    Raises `RecordError` for a value JSON cannot hold (raw tool input or output that is
    not JSON, a NaN cost): nothing is written then.
    """
    if type(record) not in get_args(Record):
        raise RecordError(f"not a record: {type(record).__name__}")
    payload: Json = {"v": RECORD_VERSION}
    payload.update(_CODEC.write(record, Record))
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise RecordError(f"cannot encode a {record.kind} record: {exc}") from None


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
    cls = _RECORD_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RecordError(f"unknown record kind: {kind!r}")
    try:
        record: Record = _CODEC.read(payload, cls)
    except RecordError as exc:
        raise RecordError(f"{kind} record: {exc}") from None
    except KeyError as exc:
        raise RecordError(f"{kind} record: missing field {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"{kind} record: {exc}") from None
    return record


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


RECORD_KINDS: Final = frozenset(_RECORD_TYPES)

__all__ = [
    "EVENTS",
    "ORIGIN_RUN",
    "PARTS",
    "RECORD_KINDS",
    "RECORD_VERSION",
    "TOOL_CONTENTS",
    "TURN_FAILED",
    "UPGRADES",
    "ArchiveRecord",
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
    "upgrade",
    "utc_now",
]
