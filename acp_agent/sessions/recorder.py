"""What a turn does, written to the session's log as it happens.

Every complete message of the history is one record, in order; what the user saw is one
record per event, with streamed text merged into one record per run of chunks (a 20,000
delta reply is one line, not 20,000). Lines are written and flushed at each event
boundary, and a long run of text at least once a second, so a killed process loses at
most the last second of a reply that was streaming.
"""

from __future__ import annotations

import time

from ..messages import (
    Message,
    MessageChunk,
    PlanUpdated,
    SubagentChanged,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEvent,
)
from .records import EventRecord, MessageRecord
from .store import LogWriter

Chunk = MessageChunk | ThoughtChunk
RUN_SECONDS = 1.0
"""The longest a streaming run of text stays unwritten (replay joins the pieces again:
they carry the same message id)."""


class TurnRecorder:
    def __init__(self, log: LogWriter) -> None:
        self._log = log
        self._run: Chunk | None = None
        """The first chunk of the run of text being gathered."""
        self._texts: list[str] = []
        self._run_started = 0.0

    def observe(self, event: TurnEvent) -> None:
        if isinstance(event, (MessageChunk, ThoughtChunk)):
            if self._run is not None and (
                type(event) is not type(self._run) or event.message_id != self._run.message_id
            ):
                self.flush()
            if self._run is None:
                self._run, self._run_started = event, time.monotonic()
            self._texts.append(event.text)
            if time.monotonic() - self._run_started >= RUN_SECONDS:
                self.flush()
            return
        self.flush()
        shown = _as_shown_later(event)
        if shown is not None:
            self._log.append(EventRecord(shown))

    def keep(self, message: Message, message_id: str | None) -> None:
        self.flush()
        self._log.append(MessageRecord(message, message_id))

    def flush(self) -> None:
        """Write the run of text gathered so far."""
        if self._run is None:
            return
        run, text = self._run, "".join(self._texts)
        self._run, self._texts = None, []
        self._log.append(EventRecord(type(run)(text, run.message_id)))


def _as_shown_later(event: TurnEvent) -> TurnEvent | None:
    """The event as a loaded session shows it again; None for what only matters live
    (usage figures, notices, a command's live output)."""
    match event:
        case ToolCallStarted() | PlanUpdated() | SubagentChanged():
            # A subagent's link: a loaded parent announces its children again.
            return event
        case ToolCallUpdated(terminal=None):
            return event
        case ToolCallUpdated():
            without_stream = ToolCallUpdated(
                event.id,
                status=event.status,
                title=event.title,
                content=event.content,
                locations=event.locations,
                raw_output=event.raw_output,
            )
            nothing_else = (
                event.status is None
                and event.title is None
                and event.content is None
                and event.locations is None
                and event.raw_output is None
            )
            return None if nothing_else else without_stream
        case _:
            return None
