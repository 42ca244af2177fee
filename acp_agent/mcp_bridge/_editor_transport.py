"""The `mcp` SDK's transport to a server in the editor: the SDK's JSON-RPC messages become
`EditorMcp` requests, and the answers and notifications come back as messages.

Each request the SDK writes is sent on its own task, under an id unique on the connection
(the transport's prefix and the SDK's id: several sessions may use the same server); a
`notifications/cancelled` from the SDK cancels that task, which cancels the outer request.
The binding carries no other notification from us (`notifications/initialized` has no
place in the 2026-07-28 protocol it speaks) and no request from the server (that revision
asks its questions in `input_required` results instead), so nothing else is sent. An outer
failure reaches the SDK as an MCP error naming the editor.

A `subscriptions/listen` request stays active while the stream lasts, and its frames come
as notifications of it, stamped by the server with the id it was sent (ours); they reach
the SDK stamped with the SDK's own id, by which it knows its stream.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from .editor import EditorMcp, EditorMcpFailed, EditorMcpMessage

log = logging.getLogger(__name__)

OUTER_FAILURE = {"acp-agent/outer": True}
"""The `data` of the MCP error that stands for an outer failure: the editor's, not the
server's (`describe_error` says so)."""

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@asynccontextmanager
async def editor_client(editor: EditorMcp, server_id: str) -> AsyncIterator[Streams]:
    """The (read, write) streams of a `ClientSession` talking to `server_id` in the editor."""
    # Unbounded towards the SDK: a notification is handed over as it is read, in order,
    # without holding up the ACP connection's reader.
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](
        math.inf
    )
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tg, incoming_send, incoming, outgoing_receive:
        relay = _Relay(editor, server_id, incoming_send, tg)
        tg.start_soon(relay.run, outgoing_receive)
        try:
            yield incoming, outgoing
        finally:
            tg.cancel_scope.cancel()


class _Relay:
    def __init__(
        self,
        editor: EditorMcp,
        server_id: str,
        incoming: MemoryObjectSendStream[SessionMessage | Exception],
        tg: TaskGroup,
    ) -> None:
        self._editor = editor
        self._server_id = server_id
        self._incoming = incoming
        self._tg = tg
        self._prefix = uuid.uuid4().hex[:12]
        self._calls: dict[types.RequestId, anyio.CancelScope] = {}

    async def run(self, outgoing: MemoryObjectReceiveStream[SessionMessage]) -> None:
        async for item in outgoing:
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                scope = anyio.CancelScope()
                self._calls[message.id] = scope
                self._tg.start_soon(self._forward, message, scope)
            elif isinstance(message, types.JSONRPCNotification):
                self._notification(message)
            else:
                log.debug("MCP over ACP: %s not sent (no server requests)", type(message).__name__)

    def _notification(self, message: types.JSONRPCNotification) -> None:
        if message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            scope = self._calls.get(request_id) if isinstance(request_id, int | str) else None
            if scope is not None:
                scope.cancel()
            return
        log.debug(
            "MCP over ACP: %s not sent (the binding has no such notification)", message.method
        )

    async def _forward(self, request: types.JSONRPCRequest, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                reply = await self._ask(request)
                await self._hand_over(reply)
        finally:
            self._calls.pop(request.id, None)

    async def _ask(self, request: types.JSONRPCRequest) -> types.JSONRPCMessage:
        ours = f"{self._prefix}-{request.id}"
        message = EditorMcpMessage(self._server_id, ours, request.method, request.params)
        try:
            answer = await self._editor.request(message, partial(self._notified, ours, request.id))
        except EditorMcpFailed as exc:
            reason = f"the editor could not answer: {exc}"
            return _error(request.id, types.INTERNAL_ERROR, reason, OUTER_FAILURE)
        if answer.error is not None:
            error = answer.error
            return _error(request.id, error["code"], error["message"], error.get("data"))
        if answer.result is None:
            return _error(request.id, types.INTERNAL_ERROR, "the editor's result is not an object")
        return types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result=answer.result)

    def _notified(
        self,
        ours: str,
        sdk_id: types.RequestId,
        method: str,
        params: dict[str, Any] | None,
    ) -> None:
        meta = params.get("_meta") if params is not None else None
        if (
            params is not None
            and isinstance(meta, dict)
            and meta.get(SUBSCRIPTION_ID_META_KEY) == ours
        ):
            params = {**params, "_meta": {**meta, SUBSCRIPTION_ID_META_KEY: sdk_id}}
        notification = types.JSONRPCNotification(jsonrpc="2.0", method=method, params=params)
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):  # session gone
            self._incoming.send_nowait(SessionMessage(notification))

    async def _hand_over(self, reply: types.JSONRPCMessage) -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._incoming.send(SessionMessage(reply))


def _error(
    request_id: types.RequestId, code: int, message: str, data: Any = None
) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message, data=data)
    )
