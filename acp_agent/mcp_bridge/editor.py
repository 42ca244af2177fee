"""MCP servers that live in the editor (`mcpServers` entries of type `acp`), reached through
the ACP connection: the neutral side of MCP over ACP.

The binding (ACP's unstable `mcp/message`) carries one inner MCP request per outer request,
named by the server's `serverId` and a `requestId` we choose; the outer answer holds the
inner outcome, an MCP result or an MCP error. While a request is active the editor may send
`mcp/message` notifications naming it (progress, log lines; a `subscriptions/listen`
request stays active while its stream lasts, and its frames are such notifications, the
servers' list changes among them). There is nothing else: no
notifications from us, no requests from the server, and a cancelled call is the outer
request cancelled (`$/cancel_request`).

The protocol layer builds one `EditorMcp` per connection from a `Send` that speaks the
wire, and hands the editor's notifications to `deliver`; the transport that the `mcp` SDK
talks through (`_editor_transport.py`) calls `request`. Nothing here imports `mcp`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EditorMcpMessage:
    """One inner MCP request or notification, and the editor server it concerns."""

    server_id: str
    request_id: str
    """Ours, unique on the connection while the request is active (not the outer id)."""
    method: str
    params: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class EditorMcpAnswer:
    """The inner outcome of a request: an MCP result, or an MCP error (`code`, `message`,
    `data`), never both."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class EditorMcpFailed(Exception):
    """The editor gave no inner outcome: it answered the outer request with an error (no
    such server, its side failed) or with something that is not an outcome."""


Send = Callable[[EditorMcpMessage], Awaitable[EditorMcpAnswer]]
"""Sends a request to the editor and returns its answer; raises `EditorMcpFailed`."""
Deliver = Callable[[str, dict[str, Any] | None], None]
"""Takes a notification (method, params) for an active request."""


class EditorMcp:
    """The editor's MCP servers on one ACP connection: requests out, the notifications
    that belong to them in."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._active: dict[tuple[str, str], Deliver] = {}

    async def request(self, message: EditorMcpMessage, on_notification: Deliver) -> EditorMcpAnswer:
        """The editor's answer to `message`; until it comes, the notifications that name
        the request go to `on_notification`. Cancelling the caller cancels the request."""
        key = (message.server_id, message.request_id)
        if key in self._active:
            raise EditorMcpFailed(f"request id {message.request_id!r} is already active")
        self._active[key] = on_notification
        try:
            return await self._send(message)
        finally:
            del self._active[key]

    def deliver(self, message: EditorMcpMessage) -> bool:
        """A notification from the editor; False (dropped) when it names no active request
        of ours, as the binding says (it may come after the answer)."""
        target = self._active.get((message.server_id, message.request_id))
        if target is None:
            log.debug("mcp/message %s for no active request dropped", message.method[:100])
            return False
        target(message.method, message.params)
        return True
