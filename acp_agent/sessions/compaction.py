"""Context compaction: when a conversation grows toward the model's context window, its
older turns are summarised by the model and the summary replaces them in what the model is
sent. The session's log keeps every message.

- **When** (`request_tokens`, `over_threshold`): before each model request, the request
  about to be sent (history with the pending prompt or tool results, system prompt, tools)
  is measured as the provider reported the last call plus an estimate of what joined the
  history since, or wholly by the token counter; past `threshold * context_window` it is
  compacted. A vendor refusing a request as too long compacts it too (the engine retries
  once). `/compact` compacts on demand.
- **Where to cut** (`find_cut`): at a turn boundary (a user message), so a tool call never
  parts from its result. The `keep_turns` most recent turns stay word for word, fewer when
  nothing older would be left to summarise, never fewer than the running turn.
- **The summary** (`summary_request`): one call to the session's current model, offering
  no tools, with the older part written out as plain user and assistant text (some vendors
  refuse tool-call blocks in a request without tools). The new working context is one
  user message marked as the summary, then the kept turns.
- **The record**: a `CompactionRecord` (how many messages of the full history the summary
  replaces, so `restore` rebuilds the same context), and the `CompactionFinished` event the
  user saw, replayed on `session/load`.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio

from ..engine import ModelSettings, ModelSetup, retry_notice
from ..messages import (
    CompactionFinished,
    CompactionStarted,
    CompactionSummaryChunk,
    DocumentPart,
    ImagePart,
    Message,
    MessageChunk,
    ModelStopReason,
    ResourceLinkPart,
    RetryNotice,
    Role,
    Stop,
    TextDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TurnEvent,
    Usage,
    UsageUpdated,
    context_use,
)
from ..providers import ContextWindowError, ModelRequest, ProviderError
from ..providers.usage import Reading, UsageMeter
from .records import CompactionRecord, EventRecord, UsageRecord
from .session import Session
from .store import LogWriter

log = logging.getLogger(__name__)

SUMMARY_OPENING = (
    "[Summary of the earlier part of this conversation, written when it was compacted to "
    "free context. The most recent turns follow word for word.]"
)
SUMMARY_SYSTEM = """\
You summarise the earlier part of a conversation between a user and a coding agent that \
works in the user's editor. The conversation outgrew the model's context window: the agent \
will continue the work from your summary and the most recent messages alone, so the \
summary must be concise but complete."""
SUMMARY_INSTRUCTION = """\
Summarise the conversation so far for the agent that continues it. Cover:
1. The user's goals and requests, with their exact constraints and preferences.
2. Decisions taken, and why.
3. Files read, created or changed (absolute paths), and what changed in each.
4. Commands run and what they showed, errors included.
5. The state of the work: what is done, what is not.
6. Pending items and the next step.
Write the summary only, without a preamble. Do not call tools."""
CLIPPED_RESULT_CHARS = 2_000
"""A tool result longer than this is cut in the text the summariser reads."""
CLIPPED_ARGUMENT_CHARS = 500
NOTICE_SECONDS = 0.5
"""Time allowed to report a compaction cancelled with its turn."""

Emit = Callable[[TurnEvent], Awaitable[None]]
Outcome = Literal["compacted", "failed", "nothing"]
"""`nothing`: no turn older than the kept ones was left to summarise (nothing was shown)."""


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    threshold: float = 0.8
    """Share of the context window the next request may take (`compaction_threshold`)."""
    keep_turns: int = 2
    """Recent user turns kept word for word (`compaction_keep_turns`)."""


class CompactionFailed(Exception):
    """The model gave no usable summary; the message says why."""


# --- when --------------------------------------------------------------------------------------


def request_tokens(meter: UsageMeter, request: ModelRequest) -> int:
    """The tokens `request` would take: the context the provider reported for the last
    call plus an estimate of the messages added since, or the counter's estimate of it all
    when no report covers the start of this history."""
    last, covered, messages = meter.last, meter.messages, request.messages
    if last is None or last.estimated or covered is None or covered > len(messages):
        return meter.counter.count_request(request.system, messages, request.tools)
    return last.used + sum(meter.counter.count_message(m) for m in messages[covered:])


def over_threshold(tokens: int, context_window: int, threshold: float) -> bool:
    return tokens > threshold * context_window


# --- where to cut ------------------------------------------------------------------------------


def find_cut(history: Sequence[Message], start: int, keep_turns: int, least: int) -> int | None:
    """Where the kept part of `history` begins: the user message opening the `keep_turns`-th
    last turn, or a later turn when nothing older would be left to summarise, keeping at
    least `least` turns (1 while a turn runs: the running one; 0 between turns).

    `start`: the first message after an earlier summary (0 without one). None when no
    message from `start` on can be summarised.
    """
    openers = [i for i in range(start, len(history)) if history[i].role == "user"]
    for keep in range(keep_turns, least - 1, -1):
        if keep == 0:
            cut = len(history)
        elif keep <= len(openers):
            cut = openers[-keep]
        else:
            continue
        if cut > start:
            return cut
    return None


# --- the summary -------------------------------------------------------------------------------


def summary_message(summary: str) -> Message:
    return Message("user", [TextPart(f"{SUMMARY_OPENING}\n\n{summary}")])


def summary_request(
    settings: ModelSettings, older: Sequence[Message], focus: str | None = None
) -> ModelRequest:
    """The request that asks the session's model to summarise `older`: no tools offered,
    little reasoning."""
    instruction = SUMMARY_INSTRUCTION
    if focus:
        instruction += f"\n\nThe user asked the summary to focus on: {focus}"
    thought = settings.thought_level
    return ModelRequest(
        model=settings.model,
        system=SUMMARY_SYSTEM,
        messages=_alternating([*as_plain_text(older), Message("user", [TextPart(instruction)])]),
        max_output_tokens=settings.max_output_tokens,
        thought_level=thought if thought in (None, "off") else "low",
    )


def as_plain_text(messages: Sequence[Message]) -> list[Message]:
    """`messages` as user and assistant text, alternating: thinking left out, images named,
    tool calls and their (clipped) results written into the assistant's message."""
    names: dict[str, str] = {}
    plain: list[Message] = []
    for message in messages:
        role: Role = "user" if message.role == "user" else "assistant"
        pieces: list[str] = []
        for part in message.parts:
            match part:
                case TextPart(text=text) if text.strip():
                    pieces.append(text)
                case ImagePart(mime_type=mime_type):
                    pieces.append(f"[image: {mime_type}]")
                case DocumentPart(name=name):
                    pieces.append(f"[document: {name}]")
                case ResourceLinkPart(context=context):
                    pieces.append(part.link)
                    pieces.extend(_mentioned(item) for item in context or ())
                case ToolCallPart(id=call_id, name=name, arguments=arguments):
                    names[call_id] = name
                    shown = _clip(json.dumps(arguments, ensure_ascii=False), CLIPPED_ARGUMENT_CHARS)
                    pieces.append(f"[called {name} {shown}]")
                case ToolResultPart(tool_call_id=call_id, is_error=is_error):
                    outcome = "failed" if is_error else "returned"
                    text = _clip(_result_text(part), CLIPPED_RESULT_CHARS)
                    pieces.append(f"[{names.get(call_id, 'the tool')} {outcome}:\n{text}]")
                case TextPart() | ThinkingPart():
                    pass
        if pieces:
            plain.append(Message(role, [TextPart("\n\n".join(pieces))]))
    return plain


def summary_text(message: Message) -> str:
    """The summary a summary message carries, without its opening line."""
    return message.text.removeprefix(SUMMARY_OPENING).strip()


async def summarise(
    setup: ModelSetup,
    request: ModelRequest,
    on_text: Callable[[str], Awaitable[None]],
    meter: UsageMeter,
    on_notice: Emit | None = None,
) -> str:
    """The model's summary, streamed to `on_text` as it comes; its cost is charged to
    `meter`; retry waits go to `on_notice` as notices. Raises `CompactionFailed` or
    `ProviderError`."""
    text: list[str] = []
    stop: ModelStopReason | None = None
    reported: Usage | None = None
    try:
        async with setup.provider.stream(request) as events:
            async for event in events:
                match event:
                    case TextDelta(text=delta):
                        text.append(delta)
                        await on_text(delta)
                    case Usage() as usage:
                        reported = usage
                    case Stop(reason=reason):
                        stop = reason
                    case RetryNotice(restarts_reply=restarts):
                        if restarts:
                            # The next attempt's whole reply replaces this one (also on
                            # screen, when the finished compaction reports the summary).
                            text, stop, reported = [], None, None
                        if on_notice is not None:
                            await on_notice(retry_notice(event))
                    case _:
                        pass  # thinking, tool calls: not part of a summary
    finally:
        if reported is not None:
            meter.charge(reported)
    if stop == "refusal":
        raise CompactionFailed("the model declined to summarise the conversation")
    summary = "".join(text).strip()
    if not summary:
        raise CompactionFailed("the model's summary was empty")
    if stop == "max_tokens":
        log.warning("the summary reached the output token limit; keeping what was written")
    return summary


# --- compacting --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Compactor:
    """Compacts one session's working context and records it in the session's log."""

    session: Session
    log: LogWriter
    policy: CompactionPolicy
    emit: Emit
    """Shows the compaction to the user (a turn's host, or the session's channel)."""

    async def compact(
        self,
        history: list[Message],
        setup: ModelSetup,
        *,
        system: str,
        tools: Sequence[ToolSpec],
        least: int,
        focus: str | None = None,
        taken: tuple[int, int] | None = None,
    ) -> Outcome:
        """Summarise the older turns of `history` (the session's working context,
        changed in place), keeping at least `least` recent ones.

        `system` and `tools`: what the next request carries, to measure the context after;
        `taken`: the tokens the conversation takes and the window's size, for the user.
        """
        session = self.session
        start = 1 if session.summarised else 0
        cut = find_cut(history, start, self.policy.keep_turns, least)
        if cut is None:
            return "nothing"
        compaction_id = f"cmp_{uuid.uuid4().hex}"
        await self.emit(CompactionStarted(compaction_id))

        async def stream(delta: str) -> None:
            await self.emit(CompactionSummaryChunk(compaction_id, delta))

        request = summary_request(setup.settings, history[:cut], focus)
        try:
            summary = await summarise(setup, request, stream, session.usage, self.emit)
        except (CompactionFailed, ProviderError) as exc:
            log.warning("session %s: compaction failed: %s", session.id, exc)
            await self._finish(CompactionFinished(compaction_id, "failed", error=str(exc)))
            return "failed"
        except Exception as exc:
            # A bug: the user hears of it, and the conversation goes on as it was.
            log.exception("session %s: compaction failed", session.id)
            error = f"compaction failed: {type(exc).__name__}: {exc}"
            await self._finish(CompactionFinished(compaction_id, "failed", error=error))
            return "failed"
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(NOTICE_SECONDS):
                await self._finish(CompactionFinished(compaction_id, "cancelled"))
            raise

        summarised = session.summarised + (cut - start)
        message = summary_message(summary)
        self.log.append(CompactionRecord(compaction_id, message, summarised))
        history[:] = [message, *history[cut:]]
        session.summarised = summarised
        log.info(
            "session %s: compacted %d messages into a summary of %d characters",
            session.id,
            cut - start,
            len(summary),
        )

        meter = session.usage
        used = meter.counter.count_request(system, history, tools)
        meter.last, meter.messages = Reading(used, meter.cost_usd, estimated=True), len(history)
        self.log.append(UsageRecord(meter.cost_usd, used, estimated=True))
        await self._finish(
            CompactionFinished(
                compaction_id,
                "completed",
                summary=summary,
                summarised=summarised,
                share=None if taken is None else taken[0] / taken[1],
                used_tokens=None if taken is None else taken[0],
                window=None if taken is None else taken[1],
            )
        )
        await self.emit(UsageUpdated(used, setup.settings.context_window, meter.cost_usd))
        return "compacted"

    async def on_demand(
        self, setup: ModelSetup, tools: Sequence[ToolSpec], focus: str | None = None
    ) -> Outcome:
        """`/compact [focus]`, between turns: below the threshold too, and when only the
        kept turns are left, those are summarised as well. `tools`: what the next request
        offers."""
        settings = setup.settings
        history = self.session.history
        measured = ModelRequest(settings.model, settings.system_prompt, list(history), tools)
        tokens = request_tokens(self.session.usage, measured)
        return await self.compact(
            history,
            setup,
            system=settings.system_prompt,
            tools=tools,
            least=0,
            focus=focus,
            taken=(tokens, settings.context_window),
        )

    async def _finish(self, event: CompactionFinished) -> None:
        self.log.append(EventRecord(event))  # shown again when the session is loaded
        await self.emit(event)


@dataclass(slots=True)
class TurnCompaction:
    """`engine.ContextGuard` of one turn: compacts before a request that would pass the
    threshold, and when the vendor refuses one as too long.

    After a failed compaction the turn goes on without trying again (but for an overflow);
    that only the running turn is left is said once per turn.
    """

    compactor: Compactor
    emit: Emit
    _failed: bool = field(default=False, init=False)
    _said_nothing_left: bool = field(default=False, init=False)

    async def fit(
        self,
        history: list[Message],
        request: ModelRequest,
        setup: ModelSetup,
        overflow: ContextWindowError | None = None,
    ) -> bool:
        window = setup.settings.context_window
        tokens = request_tokens(self.compactor.session.usage, request)
        if overflow is None and (
            self._failed or not over_threshold(tokens, window, self.compactor.policy.threshold)
        ):
            return False
        outcome = await self.compactor.compact(
            history,
            setup,
            system=request.system,
            tools=request.tools,
            least=1,
            taken=None if overflow is not None else (tokens, window),
        )
        if outcome == "failed":
            self._failed = True
        elif outcome == "nothing" and not self._said_nothing_left:
            self._said_nothing_left = True
            await self.emit(MessageChunk(_nothing_left(tokens, window, overflow), _new_id()))
        return outcome == "compacted"


def _nothing_left(tokens: int, window: int, overflow: ContextWindowError | None) -> str:
    used = "does not fit" if overflow is not None else f"takes {context_use(tokens, window)} of"
    return (
        f"[The conversation {used} the context window, but only the running turn is left: "
        "there are no older turns to summarise.]\n\n"
    )


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters]"


def _mentioned(part: TextPart | ImagePart | DocumentPart) -> str:
    """What was read for a mention, as the summary request shows it (clipped like results)."""
    match part:
        case TextPart(text=text):
            return _clip(text, CLIPPED_RESULT_CHARS)
        case ImagePart(mime_type=mime_type):
            return f"[image: {mime_type}]"
        case DocumentPart(name=name):
            return f"[document: {name}]"


def _result_text(result: ToolResultPart) -> str:
    return "\n".join(
        part.text if isinstance(part, TextPart) else f"[image: {part.mime_type}]"
        for part in result.content
    )


def _alternating(messages: list[Message]) -> list[Message]:
    """Neighbours of one role merged into one message (some servers insist on turns)."""
    merged: list[Message] = []
    for message in messages:
        if merged and merged[-1].role == message.role:
            merged[-1] = Message(message.role, [TextPart(f"{merged[-1].text}\n\n{message.text}")])
        else:
            merged.append(message)
    return merged


def _new_id() -> str:
    return uuid.uuid4().hex
