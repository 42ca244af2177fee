"""JSON-RPC 2.0 error codes and the one exception that carries them.

RpcError              an error object to send (or one received from the peer)
└── ConnectionClosed  the peer went away before answering
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
# ACP's own codes
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"RpcError({self.code}, {self.message!r})"


class ConnectionClosed(RpcError):
    def __init__(self) -> None:
        super().__init__(INTERNAL_ERROR, "connection closed before the peer answered")
