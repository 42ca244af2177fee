"""The neutral vocabulary shared by the engine, providers, tools and store.

Plain dataclasses only: no ACP types, no vendor types. Three families live here:

- conversation: `Message` made of `Part`s (what the model sees and the store keeps);
- stream events: what a provider yields while a model call streams;
- turn events: what the engine emits during a prompt turn, mapped to `session/update`
  by the protocol layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

# --- conversation -------------------------------------------------------------------------

Role: TypeAlias = Literal["user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class ImagePart:
    data: str
    """Base64-encoded bytes."""
    mime_type: str


@dataclass(frozen=True, slots=True)
class DocumentPart:
    """A document (a PDF) for the model to read. Models that take documents get it as the
    vendor's document input; others get a note naming it instead."""

    data: str
    """Base64-encoded bytes."""
    mime_type: str
    name: str
    """Where it came from (a file name or URI), for the model."""


@dataclass(frozen=True, slots=True)
class ResourceLinkPart:
    """A resource the user mentioned (`@file` in the editor, a `resource_link` in the
    prompt): the link as the user typed it, and what was read for the model.

    The model reads the link where the user put it and, after the message's own parts,
    `context` (see `model_parts`); a replayed session shows the link.
    """

    uri: str
    name: str
    mime_type: str | None = None
    context: tuple[TextPart | ImagePart | DocumentPart, ...] | None = None
    """What the mention gave the model: the file with its path and range, a directory
    listing, an image or document, or a note saying why nothing was read. None: not read
    (a link of another scheme): the model has the link alone."""
    embedded_text: str | None = None
    """The text the editor sent with the mention (an embedded resource): the model gets it
    instead of a read, within the same limit. Not stored: `context` holds what was given."""

    @property
    def link(self) -> str:
        return f"[@{self.name}]({self.uri})"


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    text: str
    provider_data: dict[str, Any] | None = None
    """Vendor-only data the vendor needs back on the next request (e.g. a signature)."""


INVALID_JSON_KEY = "_invalid_json"
"""Tool arguments that were not a JSON object arrive as {INVALID_JSON_KEY: raw text}."""


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    tool_call_id: str
    content: tuple[TextPart | ImagePart, ...]
    is_error: bool = False

    @property
    def text(self) -> str:
        return "\n".join(part.text for part in self.content if isinstance(part, TextPart))


Part: TypeAlias = (
    TextPart
    | ImagePart
    | DocumentPart
    | ResourceLinkPart
    | ThinkingPart
    | ToolCallPart
    | ToolResultPart
)


def model_parts(parts: Sequence[Part]) -> Sequence[Part]:
    """A user message's parts as the model reads them: each mention is its link where the
    user typed it (joined to the text around it, with a space where the editor sent none:
    `see [@a.py](file://…)`, not `see[@a.py](file://…)`), and what was read for the mentions
    follows the message's own parts. Parts without mentions come back as they are."""
    if not any(isinstance(part, ResourceLinkPart) for part in parts):
        return parts
    typed: list[Part] = []
    read: list[Part] = []
    previous: Part | None = None
    for part in parts:
        if isinstance(part, ResourceLinkPart):
            read.extend(part.context or ())
            if isinstance(previous, (TextPart, ResourceLinkPart)):
                typed[-1] = TextPart(_spaced(_text_of(typed[-1]), part.link))
            else:
                typed.append(TextPart(part.link))
        elif isinstance(part, TextPart) and isinstance(previous, ResourceLinkPart):
            typed[-1] = TextPart(_spaced(_text_of(typed[-1]), part.text))
        else:
            typed.append(part)
        previous = part
    return typed + read


def _spaced(before: str, after: str) -> str:
    """`before` and `after` as one text, a space between them unless either side has one."""
    if not before or not after or before[-1].isspace() or after[0].isspace():
        return before + after
    return f"{before} {after}"


def _text_of(part: Part) -> str:
    assert isinstance(part, TextPart)
    return part.text


@dataclass(slots=True)
class Message:
    role: Role
    parts: list[Part] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.parts if isinstance(part, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [part for part in self.parts if isinstance(part, ToolCallPart)]


def open_call_results(
    history: list[Message], answered: list[ToolResultPart], reason: str
) -> Message | None:
    """The tool message a history ending in tool calls still needs: the results given so far
    plus `reason` for each call left without one; None when nothing is open."""
    last = history[-1] if history else None
    if last is None or last.role != "assistant" or not last.tool_calls:
        return None
    done = {part.tool_call_id for part in answered}
    missing = [
        ToolResultPart(call.id, (TextPart(reason),), is_error=True)
        for call in last.tool_calls
        if call.id not in done
    ]
    return Message("tool", [*answered, *missing])


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""


# --- stream events (provider -> engine) ----------------------------------------------------

ModelStopReason: TypeAlias = Literal["end_turn", "max_tokens", "refusal", "tool_use", "pause_turn"]
"""`pause_turn`: the vendor paused a long turn; calling again with the reply continues it."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str
    provider_data: dict[str, Any] | None = None
    ends_block: bool = False
    """The thinking block is complete with this delta: the next thinking starts a part of its
    own (a vendor that signs its blocks needs each one back as it was sent)."""


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArgsDelta:
    id: str
    delta: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    call: ToolCallPart


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one model call; the fields are disjoint (`input_tokens` is uncached input)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Stop:
    reason: ModelStopReason


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A failed attempt will be retried after `delay` seconds; shown to the user."""

    provider: str
    reason: str
    delay: float
    attempt: int
    max_attempts: int
    restarts_reply: bool = False
    """The attempt failed after streaming part of a reply: what it streamed is void, and
    the next attempt's reply replaces it."""


StreamEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ToolCallStart
    | ToolCallArgsDelta
    | ToolCallEnd
    | Usage
    | Stop
    | RetryNotice
)


# --- turn events (engine -> protocol) ------------------------------------------------------

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
"""`cancelled`: the user stopped this one call (the turn went on); v1 shows it as failed."""


@dataclass(frozen=True, slots=True)
class Location:
    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class DiffContent:
    path: str
    old_text: str | None
    new_text: str


@dataclass(frozen=True, slots=True)
class TerminalContent:
    terminal_id: str


ToolContent: TypeAlias = TextPart | DiffContent | TerminalContent


@dataclass(frozen=True, slots=True)
class TerminalStream:
    """Live output of a command, for clients that render it beside the tool call.

    The first report carries `cwd` (a display terminal opens), later ones new `output`,
    the last `exited` with the exit status.
    """

    terminal_id: str
    cwd: str | None = None
    output: str | None = None
    exited: bool = False
    exit_code: int | None = None
    signal: str | None = None
    command: str | None = None
    """The command line, with the opening report (`cwd`)."""
    stoppable: bool = False
    """With the opening report: the user may stop this command alone (`SessionWork`)."""


@dataclass(frozen=True, slots=True)
class MessageChunk:
    text: str
    message_id: str | None = None
    """Shared by every chunk of one message; a new id starts a new message (also on replay)."""


@dataclass(frozen=True, slots=True)
class ThoughtChunk:
    text: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class UserMessageChunk:
    """A part of a user's prompt, shown again when a session is loaded."""

    part: TextPart | ImagePart | ResourceLinkPart | DocumentPart
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    id: str
    title: str
    kind: ToolKind
    status: ToolStatus = "pending"
    raw_input: dict[str, Any] | None = None
    locations: tuple[Location, ...] = ()
    content: tuple[ToolContent, ...] = ()
    """For an edit or a command, what it will do (a diff, the command line), shown before
    the user is asked."""
    name: str | None = None
    """The tool's name as the model called it."""


@dataclass(frozen=True, slots=True)
class ToolCallUpdated:
    id: str
    status: ToolStatus | None = None
    title: str | None = None
    content: tuple[ToolContent, ...] | None = None
    locations: tuple[Location, ...] | None = None
    raw_output: Any = None
    terminal: TerminalStream | None = None
    cancellable: bool = False
    """The user may cancel this call alone now (it runs); a final status withdraws it."""


PlanPriority: TypeAlias = Literal["high", "medium", "low"]
PlanStatus: TypeAlias = Literal["pending", "in_progress", "completed"]


@dataclass(frozen=True, slots=True)
class PlanEntry:
    content: str
    priority: PlanPriority = "medium"
    status: PlanStatus = "pending"


@dataclass(frozen=True, slots=True)
class PlanUpdated:
    """The whole plan, replacing the one shown; no entries and no `markdown`: it was dropped.

    `plan_id` names the plan among several a client may keep; None is the session's own plan
    (the `plan` tool's, and every plan recorded before ids existed). `markdown` is a plan
    written as one Markdown document (then `entries` is empty); `path` the absolute path of
    the file it lives in, when it has one.
    """

    entries: tuple[PlanEntry, ...]
    plan_id: str | None = None
    markdown: str | None = None
    path: str | None = None

    @property
    def removed(self) -> bool:
        return not self.entries and self.markdown is None


@dataclass(frozen=True, slots=True)
class UsageUpdated:
    used: int
    size: int
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class SessionInfoChanged:
    title: str | None = None
    updated_at: str | None = None
    """ISO 8601."""


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A slash command the user may type (`/name argument`)."""

    name: str
    description: str
    hint: str | None = None
    """What the argument is, when it takes one."""


@dataclass(frozen=True, slots=True)
class CommandsChanged:
    commands: tuple[CommandInfo, ...]


@dataclass(frozen=True, slots=True)
class CompactionStarted:
    """Older turns are being summarised to free the context window."""

    compaction_id: str


@dataclass(frozen=True, slots=True)
class CompactionSummaryChunk:
    """A piece of the summary as the model writes it."""

    compaction_id: str
    text: str


CompactionStatus: TypeAlias = Literal["completed", "failed", "cancelled"]


@dataclass(frozen=True, slots=True)
class CompactionFinished:
    compaction_id: str
    status: CompactionStatus
    summary: str | None = None
    """completed: the summary that now stands for the earlier conversation."""
    error: str | None = None
    """failed: why, readable."""
    summarised: int = 0
    """completed: how many earlier messages of the conversation the summary replaced."""
    share: float | None = None
    """The part of the context window the conversation took when compaction began."""
    used_tokens: int | None = None
    window: int | None = None
    """The tokens of that part and the window's size, to show the real figures."""


def context_use(tokens: int, window: int) -> str:
    """`3.1K of 1,000K tokens (0.3%)`: a share of the context window a user can read, also
    when it is small (no `0%` for 3,100 tokens of a million)."""
    share = 100 * tokens / window if window > 0 else 0.0
    percent = f"{share:.1f}%" if share < 10 else f"{share:.0f}%"
    return f"{_thousands(tokens)} of {_thousands(window)} tokens ({percent})"


def _thousands(tokens: int) -> str:
    if tokens < 1000:
        return f"{tokens:,}"
    if tokens < 100_000:
        return f"{tokens / 1000:.1f}".removesuffix(".0") + "K"
    return f"{round(tokens / 1000):,}K"


NoticeSeverity: TypeAlias = Literal["info", "warning", "error"]


@dataclass(frozen=True, slots=True)
class Notice:
    """Live information for the user that is not part of the conversation: a retry wait, a
    provider fallback, a local server that refused. Shown as it happens (an ACP `notice`
    to clients that advertise `session.notices`, else one bracketed line of its own in the
    thoughts), never stored for replay.

    The line clients without notices see is `[title; description]`: write `title` to stand
    alone ("openai: rate limited") and `description` as what follows from it ("retrying in
    2.0s (attempt 2 of 5)").
    """

    title: str
    """Plain text, one line, not empty."""
    description: str | None = None
    """Plain text: detail or guidance."""
    severity: NoticeSeverity = "info"
    message_id: str | None = None
    """When set, clients without notices see the line inside this agent message rather than
    in the thoughts: where it explains the message's text (a reply that starts over)."""


@dataclass(frozen=True, slots=True)
class SubagentChanged:
    """A child session this one started (the `agent` tool): announced, with its title,
    before anything of its own is shown, then its state as it runs and when it is done."""

    session_id: str
    title: str
    state: Literal["running", "idle"]
    stop_reason: str | None = None
    """How its last turn ended (idle only); None: it failed, or is running."""


@dataclass(frozen=True, slots=True)
class BackgroundChanged:
    """The work of a session that runs on its own (not in a turn) changed: the display
    terminals of its running background jobs, as the complete list. Sent when a job starts
    or ends, after its terminal was opened or its exit reported; never recorded."""

    terminals: tuple[str, ...] = ()


TurnEvent: TypeAlias = (
    MessageChunk
    | ThoughtChunk
    | UserMessageChunk
    | ToolCallStarted
    | ToolCallUpdated
    | PlanUpdated
    | UsageUpdated
    | SessionInfoChanged
    | CommandsChanged
    | CompactionStarted
    | CompactionSummaryChunk
    | CompactionFinished
    | Notice
    | SubagentChanged
    | BackgroundChanged
)

# --- asking the user ---------------------------------------------------------------------


# --- the editor's own system prompt ------------------------------------------------------


EditorPromptMode: TypeAlias = Literal["append", "override"]


@dataclass(frozen=True, slots=True)
class EditorPrompt:
    """What the editor asks the model to be told (ACP `systemPrompt`): `append` adds its
    text after our instructions, `override` replaces our built-in default prompt."""

    mode: EditorPromptMode
    text: str


@dataclass(frozen=True, slots=True)
class Elicitation:
    """A question for the user: a form (`schema`, a flat JSON schema of primitive fields)
    or a URL to open."""

    message: str
    mode: Literal["form", "url"] = "form"
    schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


TurnStopReason: TypeAlias = Literal[
    "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"
]
