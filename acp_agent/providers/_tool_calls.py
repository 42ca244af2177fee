"""Tool calls in a vendor's stream: a call whose arguments arrive in fragments, their text
parsed, and the events of a call that arrives whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..messages import (
    INVALID_JSON_KEY,
    StreamEvent,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
)


@dataclass(slots=True)
class StreamedCall:
    """A tool call under way: its arguments arrive as fragments of JSON text."""

    id: str
    name: str
    fragments: list[str] = field(default_factory=list)

    def more_arguments(self, fragment: str) -> Iterator[StreamEvent]:
        """The event of another fragment (none for an empty one)."""
        if fragment:
            self.fragments.append(fragment)
            yield ToolCallArgsDelta(id=self.id, delta=fragment)


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """Streamed argument text as an object; what is not a JSON object arrives raw, so the
    engine can tell the model its arguments did not parse."""
    if not raw.strip():
        return {}  # servers send nothing at all for a tool without parameters
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError:
        return {INVALID_JSON_KEY: raw}
    return arguments if isinstance(arguments, dict) else {INVALID_JSON_KEY: raw}


def whole_tool_call(call_id: str, name: str, raw_arguments: str) -> Iterator[StreamEvent]:
    """The events of a tool call that arrives complete: its start, its arguments as one
    delta (if any), its end."""
    yield ToolCallStart(id=call_id, name=name)
    if raw_arguments:
        yield ToolCallArgsDelta(id=call_id, delta=raw_arguments)
    arguments = parse_tool_arguments(raw_arguments)
    yield ToolCallEnd(ToolCallPart(id=call_id, name=name, arguments=arguments))
