"""How a prompt ended (`PromptOutcome`, what the editor is answered), and how a turn that
ended without a reply is told: to the model, by a marker in the history
(so the next request never holds two user messages in a row, which some vendors and chat
templates refuse), and to the user, when a loaded session shows the turn again.

A failed prompt answers the editor with an error, and a cancelled one with `cancelled`:
live, the editor says what happened. The log keeps it in the turn's end record, and replay
says it again in words.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import Message, MessageChunk, TextPart, TurnStopReason
from ..providers import ProviderError
from .records import TURN_FAILED, TurnEndRecord


@dataclass(frozen=True, slots=True)
class PromptOutcome:
    """How a prompt (a turn or a slash command) ended, as the editor is answered."""

    stop_reason: TurnStopReason
    choices_changed: bool = False
    """A slash command changed the session's model or mode (the editor's pickers need
    updating)."""
    mode_changed: bool = False
    """A slash command changed the session's mode (clients that know only modes are told)."""


def failure_text(exc: BaseException) -> str:
    """What failed, as the user reads it: `the model's reply failed: HTTP 500 …`."""
    if isinstance(exc, ProviderError):
        return f"the model's reply failed: {exc}"
    return f"the turn failed: {type(exc).__name__}: {exc}"


def unanswered(history: Sequence[Message]) -> bool:
    """The turn left the prompt last, with no reply: the next user message would follow a
    user message. Tool results last (a cancelled tool call) need no marker: every vendor
    takes a user message after them, and the results say what became of each call."""
    return bool(history) and history[-1].role == "user"


_ENDINGS = {
    "cancelled": "the user cancelled the turn",
    "max_turn_requests": "the turn reached its limit of model requests",
    "max_tokens": "the turn reached a token limit",
}


def no_reply_marker(failure: str | None, stop: str) -> Message:
    """The assistant's place in the history after a turn that left no reply last: what
    failed (`failure_text`), else how the turn ended."""
    what = failure or _ENDINGS.get(stop, f"the turn ended ({stop})")
    return Message("assistant", [TextPart(f"[No reply: {what.rstrip('.')}.]")])


def replayed_end(record: TurnEndRecord) -> MessageChunk | None:
    """A loaded session's line for a turn that failed or was cancelled; None for the rest."""
    if record.stop_reason == TURN_FAILED:
        text = record.error or "the turn failed"
    elif record.stop_reason == "cancelled":
        text = "cancelled"
    else:
        return None
    return MessageChunk(f"\n\n[{text[:1].upper()}{text[1:]}]\n\n", uuid.uuid4().hex)


__all__ = ["failure_text", "no_reply_marker", "replayed_end", "unanswered"]
