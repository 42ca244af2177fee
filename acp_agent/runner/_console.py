"""What the user sees: the reply on stdout, everything else on stderr.

stdout carries only the agent's reply, so `acp-agent run ... > answer.txt` keeps just the
answer. Tool calls, plans, thoughts and notices go to stderr, one readable line each.
When both streams are the same terminal, a line on stderr first ends the reply's open
line, so the two never share a line.

On a terminal, stderr's last line is a status line while the run waits (`_status.py`):
every other write wipes it first, and it is not drawn while a reply or thought line is
open on the same terminal or a question waits for its answer. With `show_reply` off
(`--output json`), the reply is gathered elsewhere and stdout is left alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, TextIO

from ._status import CLEAR_LINE, format_status

DIM = "\x1b[2m"
RESET = "\x1b[0m"
PLAN_MARKS = {"completed": "[x]", "in_progress": "[~]"}


@dataclass
class _ToolCall:
    title: str
    kind: str
    announced: bool = False


class Console:
    def __init__(
        self, out: TextIO, err: TextIO, *, show_reply: bool = True, status: bool = False
    ) -> None:
        self._out = out
        self._err = err
        self._out_tty = _is_tty(out)
        self._err_tty = _is_tty(err)
        self._show_reply = show_reply
        self._status = status and self._err_tty
        self._status_shown = False
        self._question_open = False  # a prompt() waits for its answer on this line
        self._reply_open = False  # the reply's last line has no newline yet
        self._thought_open = False
        self._tool_calls: dict[str, _ToolCall] = {}
        self._running: dict[str, str] = {}
        """Tool calls in progress, by id: their titles, for the status line."""

    # --- the stream ----------------------------------------------------------------------

    def show_update(self, update: Any) -> None:
        """One `session/update` payload; kinds a terminal cannot show are skipped."""
        if not isinstance(update, dict):
            return
        match update.get("sessionUpdate"):
            case "agent_message_chunk":
                self.reply(_block_text(update.get("content")))
            case "agent_thought_chunk":
                self.thought(_block_text(update.get("content")))
            case "tool_call":
                self._tool_call_started(update)
            case "tool_call_update":
                self._tool_call_updated(update)
            case "plan":
                self._plan(update.get("entries"))
            case "notice":
                self._notice(update)
            case _:
                pass  # usage, modes, commands, session info: nothing to print

    def reply(self, text: str) -> None:
        if not text or not self._show_reply:
            return
        self._clear_status()
        self._end_thought()
        self._out.write(text)
        self._out.flush()
        self._reply_open = not text.endswith("\n")

    def thought(self, text: str) -> None:
        if not text:
            return
        self._clear_status()
        self._end_reply_line()
        if self._err_tty:
            self._err.write(f"{DIM}{text}{RESET}")
            self._thought_open = not text.endswith("\n")
        else:
            # Piped stderr has no dimming: mark each line so logs stay readable.
            for piece in text.splitlines(keepends=True):
                if not self._thought_open:
                    self._err.write("thinking: ")
                self._err.write(piece)
                self._thought_open = not piece.endswith("\n")
        self._err.flush()

    def notice(self, line: str) -> None:
        """A line of its own on stderr."""
        self._clear_status()
        self._end_thought()
        self._end_reply_line()
        self._err.write(line + "\n")
        self._err.flush()

    def prompt(self, text: str) -> None:
        """A question on stderr; the answer is typed on the same line."""
        self._clear_status()
        self._end_thought()
        self._end_reply_line()
        self._err.write(text)
        self._err.flush()
        self._question_open = True

    def answered(self) -> None:
        """The question's answer was read: the status line may come back."""
        self._question_open = False

    def finish(self) -> None:
        """End the output with a newline, as a shell prompt expects."""
        self._clear_status()
        self._end_thought()
        if self._reply_open:
            self._out.write("\n")
            self._out.flush()
            self._reply_open = False

    # --- tool calls ----------------------------------------------------------------------

    def announce_tool_call(self, tool_call_id: str, title: str | None = None) -> None:
        """Print the `→` line once, with the best title known by then."""
        call = self._tool_calls.setdefault(tool_call_id, _ToolCall(title or "tool", "other"))
        if title:
            call.title = title
        if not call.announced:
            call.announced = True
            self.notice(f"→ {call.title} ({call.kind})")

    def _tool_call_started(self, update: dict[str, Any]) -> None:
        tool_call_id = str(update.get("toolCallId"))
        self._tool_calls[tool_call_id] = _ToolCall(
            title=_str(update.get("title")) or "tool", kind=_str(update.get("kind")) or "other"
        )
        self._tool_status(tool_call_id, update)

    def _tool_call_updated(self, update: dict[str, Any]) -> None:
        tool_call_id = str(update.get("toolCallId"))
        call = self._tool_calls.setdefault(tool_call_id, _ToolCall("tool", "other"))
        call.title = _str(update.get("title")) or call.title
        call.kind = _str(update.get("kind")) or call.kind
        self._tool_status(tool_call_id, update)

    def _tool_status(self, tool_call_id: str, update: dict[str, Any]) -> None:
        # The `→` line waits until the call runs: agents refine the title after the start
        # (our own sends the tool name first, then "Read /path").
        status = update.get("status")
        if status not in ("in_progress", "completed", "failed"):
            return
        self.announce_tool_call(tool_call_id)
        title = self._tool_calls[tool_call_id].title
        if status == "in_progress":
            self._running[tool_call_id] = title
        else:
            self._running.pop(tool_call_id, None)
        if status == "completed":
            self.notice(f"✓ {title}")
        elif status == "failed":
            reason = _content_text(update.get("content"))
            self.notice(f"✗ {title}: {reason}" if reason else f"✗ {title}")

    # --- notices -------------------------------------------------------------------------

    def _notice(self, update: dict[str, Any]) -> None:
        """`notice: title — description`, on a line of its own."""
        title = " ".join(_str(update.get("title")).split())
        description = " ".join(_str(update.get("description")).split())
        if title or description:
            self.notice(f"notice: {' — '.join(part for part in (title, description) if part)}")

    # --- the status line -----------------------------------------------------------------

    def refresh_status(self, model: str, elapsed: float, frame: int) -> None:
        """Draw (or redraw) the status line, when stderr is a terminal free to take it."""
        if not self._status or self._question_open or self._thought_open:
            return
        if self._reply_open and self._out_tty:
            return  # the reply's open line is where the status would go
        tool = next(reversed(self._running.values()), None)
        text = format_status(model, elapsed, tool, frame=frame, width=_width(self._err))
        self._err.write(CLEAR_LINE + text)
        self._err.flush()
        self._status_shown = True

    def _clear_status(self) -> None:
        if self._status_shown:
            self._err.write(CLEAR_LINE)
            self._err.flush()
            self._status_shown = False

    # --- plans ---------------------------------------------------------------------------

    def _plan(self, entries: Any) -> None:
        if not isinstance(entries, list):
            return
        lines = ["Plan:"]
        for entry in entries:
            if isinstance(entry, dict):
                mark = PLAN_MARKS.get(str(entry.get("status")), "[ ]")
                lines.append(f"  {mark} {_str(entry.get('content'))}")
        self.notice("\n".join(lines))

    # --- line bookkeeping ----------------------------------------------------------------

    def _end_thought(self) -> None:
        if self._thought_open:
            self._err.write("\n")
            self._err.flush()
            self._thought_open = False

    def _end_reply_line(self) -> None:
        # Only a shared terminal needs it; a piped reply must stay exactly as sent.
        if self._reply_open and self._out_tty and self._err_tty:
            self._out.write("\n")
            self._out.flush()
            self._reply_open = False


def _block_text(block: Any) -> str:
    """A content block as text; non-text blocks show as a bracketed placeholder."""
    if not isinstance(block, dict):
        return ""
    if block.get("type") == "text":
        return _str(block.get("text"))
    return f"[{_str(block.get('type')) or 'content'}]"


def _content_text(content: Any) -> str:
    """The text of a tool call's content list (how agents explain a failure)."""
    if not isinstance(content, list):
        return ""
    texts = [
        _block_text(item.get("content"))
        for item in content
        if isinstance(item, dict) and item.get("type") == "content"
    ]
    return " ".join(text.strip() for text in texts if text.strip())


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _width(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80
    return columns if columns > 0 else 80  # a terminal that never said its size


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
