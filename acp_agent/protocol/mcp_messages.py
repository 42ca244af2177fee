"""`mcp/message` on the wire (unstable, MCP over ACP): our requests to the servers that live
in the editor, and the editor's notifications for them, in and out of the bridge's terms
(`mcp_bridge.EditorMcp`).

The outer answer carries the inner outcome, `{"result": …}` or `{"error": {code, message,
data?}}` (`result` wins when both are there); an outer error is the binding's or the
editor's own failure, and so is an answer with neither.
"""

from __future__ import annotations

from typing import Any

from ..mcp_bridge import EditorMcp, EditorMcpAnswer, EditorMcpFailed, EditorMcpMessage
from ..rpc.endpoint import Endpoint
from ..rpc.errors import RpcError
from .fields import text

METHOD = "mcp/message"


def editor_mcp(endpoint: Endpoint) -> EditorMcp:
    """The editor's MCP servers on this connection."""

    async def send(message: EditorMcpMessage) -> EditorMcpAnswer:
        try:
            raw = await endpoint.request(METHOD, _params(message))
        except RpcError as exc:
            raise EditorMcpFailed(f"{_reason(exc)} ({exc.code})") from None
        return _answer(raw)

    return EditorMcp(send)


def notification(params: dict[str, Any]) -> EditorMcpMessage:
    """An `mcp/message` notification's params (`MessageMcpNotification`); raises `Invalid`."""
    inner = params.get("params")
    return EditorMcpMessage(
        server_id=text(params, "serverId"),
        request_id=text(params, "requestId"),
        method=text(params, "method"),
        params=inner if isinstance(inner, dict) else None,  # null or invalid: absent
    )


def _params(message: EditorMcpMessage) -> dict[str, Any]:
    params: dict[str, Any] = {
        "serverId": message.server_id,
        "requestId": message.request_id,
        "method": message.method,
    }
    if message.params is not None:
        params["params"] = message.params
    return params


def _answer(raw: Any) -> EditorMcpAnswer:
    if isinstance(raw, dict):
        if "result" in raw:
            result = raw["result"]
            return EditorMcpAnswer(result=result if isinstance(result, dict) else None)
        error = raw.get("error")
        if _is_mcp_error(error):
            return EditorMcpAnswer(error=error)
    raise EditorMcpFailed("its answer holds neither an MCP result nor an MCP error")


def _is_mcp_error(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    code = value.get("code")
    return (
        isinstance(code, int)
        and not isinstance(code, bool)
        and isinstance(value.get("message"), str)
    )


def _reason(error: RpcError) -> str:
    """The editor's message, with the detail clients put in `data.details`."""
    data = error.data
    detail = data.get("details") if isinstance(data, dict) else None
    if isinstance(detail, str) and detail and detail not in error.message:
        return f"{error.message}: {detail}"
    return error.message
