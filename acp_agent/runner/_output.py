"""`--output json` and `--output stream-json`: the turn as data, for scripts.

`json` prints one object when the run ends; `stream-json` prints one object per line as
things happen (the ACP `session/update` payloads unchanged), ending with the same object:

    {"type": "session", "sessionId": "...", "model": "openai/gpt-4.1", "cwd": "/src"}
    {"type": "update", "update": {"sessionUpdate": "agent_message_chunk", "content": {...}}}
    {"type": "result", "stopReason": "end_turn", "exitCode": 0, "text": "...",
     "usage": {"used": 5120, "size": 128000}, "cost": {"amount": 0.0123, "currency": "USD"},
     "toolCalls": [{"toolCallId": "...", "title": "Read /src/app.py", "kind": "read",
                    "status": "completed", "rawInput": {...}}],
     "sessionId": "...", "model": "...", "durationMs": 1234, "error": null}

`usage` is the context the conversation takes (`used` of `size` tokens) and `cost` the
session's cost so far, as the agent's last `usage_update` said (null when it sent none, or
had no prices); the agent's own per-turn token counts, when its answer carries them, are
in `turnUsage`. Nothing but these objects goes to stdout; notices stay on stderr.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

OutputFormat = Literal["text", "json", "stream-json"]


@dataclass
class Transcript:
    """What the turn produced, gathered from the `session/update` payloads."""

    texts: list[str] = field(default_factory=list)
    tool_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None

    def add(self, update: Any) -> None:
        if not isinstance(update, dict):
            return
        match update.get("sessionUpdate"):
            case "agent_message_chunk":
                content = update.get("content")
                if isinstance(content, dict) and content.get("type") == "text":
                    self.texts.append(str(content.get("text", "")))
            case "tool_call" | "tool_call_update":
                self._tool_call(update)
            case "usage_update":
                self.usage = {"used": update.get("used"), "size": update.get("size")}
                if isinstance(update.get("cost"), dict):
                    self.cost = update["cost"]
            case _:
                pass

    def _tool_call(self, update: dict[str, Any]) -> None:
        tool_call_id = str(update.get("toolCallId"))
        call = self.tool_calls.setdefault(tool_call_id, {"toolCallId": tool_call_id})
        for key in ("title", "kind", "status", "rawInput", "rawOutput", "locations"):
            if update.get(key) is not None:
                call[key] = update[key]

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def result(
        self,
        *,
        session_id: str | None,
        model: str | None,
        stop_reason: str | None,
        exit_code: int,
        error: str | None,
        duration_ms: int,
        turn_usage: Any = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "type": "result",
            "stopReason": stop_reason,
            "exitCode": exit_code,
            "text": self.text,
            "usage": self.usage,
            "cost": self.cost,
            "toolCalls": list(self.tool_calls.values()),
            "sessionId": session_id,
            "model": model,
            "durationMs": duration_ms,
            "error": error,
        }
        if turn_usage is not None:
            result["turnUsage"] = turn_usage
        return result


class JsonLines:
    """One JSON object per line on `out`, flushed at once (a reader sees it as it happens)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def emit(self, event: dict[str, Any]) -> None:
        self._out.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._out.flush()
