"""Every frame in the debug log: direction, kind, method, id and size, and the start of
its body, the agent's secrets cut out first (`logs.redacted`).

    frame in: request session/prompt id 3, 412 bytes: {"jsonrpc":"2.0","id":3,...
    frame out: response id 3 (result), 52 bytes: {"jsonrpc":"2.0","id":3,"result":...

Costs one level check per frame unless the log is at debug.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

from ..logs import redacted

log = logging.getLogger("acp_agent.rpc.frames")

BODY_CHARS = 200
"""Characters of a frame's body quoted; a prompt or a file's content is cut there."""


def log_frame(direction: Literal["in", "out"], frame: bytes) -> None:
    if not log.isEnabledFor(logging.DEBUG):
        return
    try:
        # Redacted before it is cut: half a key would pass the log's own redaction.
        text = redacted(frame.decode("utf-8", "replace").rstrip("\n"))
    except Exception:  # the log must never cost a frame; nor show one it cannot clean
        log.debug("frame %s: %d bytes (not shown: redaction failed)", direction, len(frame))
        return
    described = _describe(text)
    if described.startswith(_UNQUOTED):
        # The editor's headers for its gateway (`providers/set`): secrets we do not know
        # as such, so the body is never quoted.
        body = "(not shown: it carries the editor's provider headers)"
    else:
        body = text if len(text) <= BODY_CHARS else text[: BODY_CHARS - 1] + "…"
    log.debug("frame %s: %s, %d bytes: %s", direction, described, len(frame), body)


_UNQUOTED = ("request providers/set ", "notification providers/set")


def _describe(text: str) -> str:
    try:
        message: Any = json.loads(text)
    except ValueError:
        return "not JSON"
    if not isinstance(message, dict):
        return f"a JSON {type(message).__name__}"
    method, has_id = message.get("method"), "id" in message
    ident = f" id {_short(message.get('id'))}" if has_id else ""
    if isinstance(method, str):
        return f"{'request' if has_id else 'notification'} {_short(method)}{ident}"
    outcome = "error" if "error" in message else "result"
    return f"response{ident} ({outcome})"


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
