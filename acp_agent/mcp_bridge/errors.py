"""MCP failures, translated once from the SDK's exceptions (in `_connection.py`).

    McpError               any failure of an MCP server or call; the message names the server
    ├── UnknownName        no such tool or prompt (among the connected servers)
    ├── ServerUnavailable  the server is not connected: it failed to start, did not answer in
    │                      time, crashed or was closed (`status` says which, with its stderr)
    └── CallFailed         a call got no usable answer: an error response, the connection lost
                           mid-call, a result that is not MCP

A tool that answers with `isError` is not an exception: its result says so
(`McpToolResult.is_error`), as the model must read the message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import ServerStatus


class McpError(Exception):
    """The message is ready to show to the user and the model."""


class UnknownName(McpError):
    pass


class ServerUnavailable(McpError):
    def __init__(self, status: ServerStatus) -> None:
        super().__init__(status.describe_failure())
        self.status = status


class CallFailed(McpError):
    pass
