"""`mcp/message` on the wire: our requests' params, the editor's outer answers read as the
binding says (`result` wins, an invalid outcome or an outer error is the editor's failure),
and its notifications routed to the request they name, and only while it is active."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_agent.mcp_bridge import EditorMcpAnswer, EditorMcpFailed, EditorMcpMessage
from acp_agent.protocol.fields import Invalid
from acp_agent.protocol.mcp_messages import editor_mcp, notification
from acp_agent.rpc.errors import RpcError

pytestmark = pytest.mark.anyio

MESSAGE = EditorMcpMessage("tools:1", "r-1", "tools/call", {"name": "echo"})


class Peer:
    """The rpc layer's `request`, answered with `answer` (or raising it)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[tuple[str, Any]] = []

    async def request(self, method: str, params: Any) -> Any:
        self.sent.append((method, params))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def ask(answer: Any, message: EditorMcpMessage = MESSAGE) -> EditorMcpAnswer:
    return await editor_mcp(Peer(answer)).request(message, lambda m, p: None)  # type: ignore[arg-type]


async def test_a_request_carries_the_server_our_request_id_and_the_inner_message() -> None:
    peer = Peer({"result": {"content": []}})
    mcp = editor_mcp(peer)  # type: ignore[arg-type]
    await mcp.request(MESSAGE, lambda m, p: None)
    await mcp.request(EditorMcpMessage("tools:1", "r-2", "tools/list"), lambda m, p: None)
    assert peer.sent == [
        (
            "mcp/message",
            {
                "serverId": "tools:1",
                "requestId": "r-1",
                "method": "tools/call",
                "params": {"name": "echo"},
            },
        ),
        ("mcp/message", {"serverId": "tools:1", "requestId": "r-2", "method": "tools/list"}),
    ]


@pytest.mark.parametrize(
    ("answer", "read"),
    [
        ({"result": {"tools": []}}, EditorMcpAnswer(result={"tools": []})),
        (
            {"result": {"ok": 1}, "error": {"code": 1, "message": "x"}},
            EditorMcpAnswer(result={"ok": 1}),
        ),
        ({"result": None}, EditorMcpAnswer()),  # a result, but no MCP one
        (
            {"error": {"code": -32602, "message": "bad", "data": None}, "_meta": {}},
            EditorMcpAnswer(error={"code": -32602, "message": "bad", "data": None}),
        ),
    ],
)
async def test_the_answer_is_read_as_the_binding_says(answer: Any, read: EditorMcpAnswer) -> None:
    assert await ask(answer) == read


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({}, "its answer holds neither an MCP result nor an MCP error"),
        ({"error": {"code": "x", "message": "m"}}, "neither an MCP result"),
        ({"error": {"code": True, "message": "m"}}, "neither an MCP result"),
        (None, "neither an MCP result"),
        (
            RpcError(-33001, "MCP server registration unavailable", {"serverId": "tools:1"}),
            "MCP server registration unavailable (-33001)",
        ),
        (
            RpcError(-33002, "MCP server handler failed", {"details": "disk full"}),
            "MCP server handler failed: disk full (-33002)",
        ),
    ],
)
async def test_an_outer_error_or_no_outcome_is_the_editors_failure(
    answer: Any, reason: str
) -> None:
    with pytest.raises(EditorMcpFailed, match=reason.replace("(", r"\(").replace(")", r"\)")):
        await ask(answer)


async def test_a_notification_reaches_its_active_request_and_none_other() -> None:
    got: list[tuple[str, Any]] = []
    release = anyio.Event()

    class Slow(Peer):
        async def request(self, method: str, params: Any) -> Any:
            await release.wait()
            return {"result": {}}

    mcp = editor_mcp(Slow(None))  # type: ignore[arg-type]
    progress = {"progressToken": 0, "progress": 1}
    raw = {"serverId": "tools:1", "requestId": "r-1", "method": "notifications/progress"}
    async with anyio.create_task_group() as tg:
        tg.start_soon(mcp.request, MESSAGE, lambda m, p: got.append((m, p)))
        await anyio.wait_all_tasks_blocked()
        assert mcp.deliver(notification({**raw, "params": progress}))
        assert not mcp.deliver(notification({**raw, "serverId": "other"}))
        assert not mcp.deliver(notification({**raw, "requestId": "r-9"}))
        release.set()
    assert not mcp.deliver(notification(raw))  # after the answer: dropped
    assert got == [("notifications/progress", progress)]


def test_a_notification_without_its_ids_is_refused_and_bad_params_are_absent() -> None:
    with pytest.raises(Invalid, match="requestId: missing"):
        notification({"serverId": "s", "method": "m"})
    read = notification({"serverId": "s", "requestId": "r", "method": "m", "params": [1]})
    assert read == EditorMcpMessage("s", "r", "m", None)
