"""JSON-RPC batches on an endpoint that accepts them (ACP v2 connections turn it on).

The ACP v2 transports page: `[]` gets one -32600 object with id null; a batch of only
notifications gets nothing; a batch of requests gets one array of responses matched by id
(run concurrently); an invalid entry gets its own -32600 (id null) inside the array. An
endpoint that was not told to accept them keeps refusing them (`test_rpc_endpoint`).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from test_rpc_endpoint import Handler, Serving, assert_still_serving

from acp_agent.rpc.endpoint import Endpoint

pytestmark = pytest.mark.anyio


def request(request_id: int | str, method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def notification(method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


async def receive_array(wire: Any) -> list[dict[str, Any]]:
    frame = json.loads(await wire.receive_raw())
    assert isinstance(frame, list), frame
    return frame


def by_id(responses: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {response["id"]: response for response in responses}


def batching(endpoint: Endpoint) -> None:
    endpoint.accept_batches = True


async def test_an_empty_batch_gets_one_invalid_request_object_with_a_null_id(
    serving: Serving,
) -> None:
    async with serving(Handler()) as (endpoint, wire):
        batching(endpoint)
        await wire.send([])
        reply = await wire.receive()  # an object, not an array
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)
        await assert_still_serving(wire)


async def test_a_batch_of_notifications_gets_no_answer_and_each_is_handled(
    serving: Serving,
) -> None:
    handler = Handler()
    async with serving(handler) as (endpoint, wire):
        batching(endpoint)
        await wire.send([notification("tick", 1), notification("tick", 2)])
        await assert_still_serving(wire)  # the next frame is this answer: nothing before it
    assert handler.notifications == [("tick", 1), ("tick", 2)]


async def test_a_batch_of_requests_gets_one_array_with_every_response_matched_by_id(
    serving: Serving,
) -> None:
    async with serving(Handler()) as (endpoint, wire):
        batching(endpoint)
        await wire.send([request(1, "echo", {"n": 1}), notification("tick"), request("b", "boom")])
        responses = by_id(await receive_array(wire))
        assert set(responses) == {1, "b"}  # none for the notification
        assert responses[1]["result"] == {"n": 1}
        assert responses["b"]["error"]["code"] == -32603
        await assert_still_serving(wire)


async def test_the_requests_of_a_batch_run_concurrently(serving: Serving) -> None:
    handler = Handler()
    async with serving(handler) as (endpoint, wire):
        batching(endpoint)
        await wire.send([request(1, "slow", "a"), request(2, "slow", "b")])
        with anyio.fail_after(5):
            await handler.started_event("a").wait()
            await handler.started_event("b").wait()  # both started, neither answered
        handler.release.set()
        responses = by_id(await receive_array(wire))
        assert [responses[i]["result"] for i in (1, 2)] == ["slow done", "slow done"]


async def test_invalid_entries_get_their_own_invalid_request_inside_the_array(
    serving: Serving,
) -> None:
    async with serving(Handler()) as (endpoint, wire):
        batching(endpoint)
        no_method = {"jsonrpc": "2.0", "id": "no-method"}
        entries = [1, request(7, "echo", "ok"), {"jsonrpc": "2.0", "id": True}, [], no_method]
        await wire.send(entries)
        responses = await receive_array(wire)
        assert len(responses) == 5
        invalid = [r for r in responses if r["id"] is None]
        assert [r["error"]["code"] for r in invalid] == [-32600] * 4
        assert by_id(responses)[7]["result"] == "ok"


async def test_a_batch_of_only_invalid_entries_is_answered_with_an_array(
    serving: Serving,
) -> None:
    async with serving(Handler()) as (endpoint, wire):
        batching(endpoint)
        await wire.send(["x"])
        assert [r["error"]["code"] for r in await receive_array(wire)] == [-32600]


async def test_notifications_a_request_sends_come_before_its_batch_answer(
    serving: Serving,
) -> None:
    handler = Handler()
    async with serving(handler) as (endpoint, wire):
        handler.endpoint = endpoint
        batching(endpoint)
        await wire.send([request(1, "chatty", 2)])
        assert (await wire.receive())["method"] == "progress"
        assert (await wire.receive())["method"] == "progress"
        assert by_id(await receive_array(wire))[1]["result"] == "chatty done"


async def test_without_batches_turned_on_an_array_is_still_refused(serving: Serving) -> None:
    handler = Handler()
    async with serving(handler) as (_, wire):
        await wire.send([request(1, "echo")])
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)
