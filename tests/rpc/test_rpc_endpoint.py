from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest

from acp_agent.rpc.endpoint import Endpoint, FollowedBy
from acp_agent.rpc.errors import ConnectionClosed, RpcError
from acp_agent.rpc.framing import StreamSink, StreamSource

Serving = Callable[..., AbstractAsyncContextManager[tuple[Endpoint, Any]]]

pytestmark = pytest.mark.anyio


class Handler:
    """Test methods: `echo`, `slow` (waits for `release`), `boom`, `chatty` (notifies first)."""

    def __init__(self) -> None:
        self.endpoint: Endpoint | None = None
        self.release = anyio.Event()
        self.started: dict[str, anyio.Event] = {}
        self.cancelled: list[Any] = []
        self.notifications: list[tuple[str, Any]] = []

    def started_event(self, key: str) -> anyio.Event:
        return self.started.setdefault(key, anyio.Event())

    async def handle_request(self, method: str, params: Any) -> Any:
        match method:
            case "echo":
                return params
            case "slow":
                self.started_event(str(params)).set()
                try:
                    await self.release.wait()
                except anyio.get_cancelled_exc_class():
                    self.cancelled.append(params)
                    raise
                return "slow done"
            case "sleep":
                await anyio.sleep(params)
                return "slept"
            case "boom":
                raise ValueError("the handler broke\nwith two lines")
            case "unserializable":
                return {"value": object()}
            case "invalid_params":
                raise RpcError(-32602, "x must be an integer", {"field": "x"})
            case "chatty":
                assert self.endpoint is not None
                for number in range(params):
                    await self.endpoint.notify("progress", {"step": number})
                return "chatty done"
            case _:
                raise RpcError(-32601, f"method not found: {method}")

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notifications.append((method, params))


@pytest.fixture
def handler() -> Handler:
    return Handler()


async def assert_still_serving(wire: Any, request_id: int | str = "next") -> None:
    await wire.request(request_id, "echo", {"still": "serving"})
    assert await wire.receive() == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"still": "serving"},
    }


# --- inbound requests ------------------------------------------------------------------


async def test_a_request_is_answered_with_its_result_under_its_integer_id(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(7, "echo", {"a": [1, 2]})
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 7, "result": {"a": [1, 2]}}


async def test_a_request_is_answered_under_its_string_id(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request("abc-1", "echo", "x")
        assert await wire.receive() == {"jsonrpc": "2.0", "id": "abc-1", "result": "x"}


async def test_a_request_without_params_reaches_the_handler_as_none(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "echo"})
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": None}


async def test_a_slow_handler_does_not_delay_a_second_request(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(1, "slow", "first")
        await wire.request(2, "echo", "fast")
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 2, "result": "fast"}
        handler.release.set()
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": "slow done"}


async def test_a_slow_handler_does_not_delay_a_notification(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(1, "slow", "first")
        await handler.started_event("first").wait()
        await wire.notify("hello", {"n": 1})
        await assert_still_serving(wire)
        assert handler.notifications == [("hello", {"n": 1})]
        assert not handler.release.is_set()
        handler.release.set()
        assert (await wire.receive())["id"] == 1


async def test_many_slow_requests_run_at_the_same_time(serving: Serving, handler: Handler) -> None:
    async with serving(handler) as (_, wire):
        start = anyio.current_time()
        for number in range(20):
            await wire.request(number, "sleep", 0.1)
        answered = {(await wire.receive())["id"] for _ in range(20)}
        assert answered == set(range(20))
        assert anyio.current_time() - start < 1.0


async def test_a_handlers_notifications_are_written_before_its_response(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (endpoint, wire):
        handler.endpoint = endpoint
        await wire.request(1, "chatty", 50)
        frames = [await wire.receive() for _ in range(51)]
        assert frames[:50] == [
            {"jsonrpc": "2.0", "method": "progress", "params": {"step": n}} for n in range(50)
        ]
        assert frames[50] == {"jsonrpc": "2.0", "id": 1, "result": "chatty done"}


async def test_an_rpc_error_from_the_handler_is_answered_with_its_code_message_and_data(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(3, "invalid_params", {})
        assert await wire.receive() == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32602, "message": "x must be an integer", "data": {"field": "x"}},
        }


async def test_an_unknown_method_is_answered_method_not_found(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(4, "no/such/method", {})
        reply = await wire.receive()
        assert reply["id"] == 4
        assert reply["error"]["code"] == -32601
        assert "no/such/method" in reply["error"]["message"]
        await assert_still_serving(wire)


async def test_an_unexpected_exception_is_answered_internal_error_without_a_traceback(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(5, "boom", None)
        reply = await wire.receive()
        assert reply["id"] == 5
        assert reply["error"]["code"] == -32603
        message = reply["error"]["message"]
        assert message == "boom failed: ValueError: the handler broke"
        assert "data" not in reply["error"]
        await assert_still_serving(wire)


async def test_an_unexpected_exception_with_a_long_message_is_answered_in_one_short_line(
    serving: Serving, handler: Handler
) -> None:
    class Verbose(Handler):
        async def handle_request(self, method: str, params: Any) -> Any:
            raise RuntimeError("x" * 5000 + "\nsecond line\n  third")

    async with serving(Verbose()) as (_, wire):
        await wire.request(1, "verbose", None)
        message = (await wire.receive())["error"]["message"]
        assert message.startswith("verbose failed: RuntimeError: xxx")
        assert "\n" not in message
        assert len(message) < 400


async def test_an_unexpected_exception_without_a_message_names_its_type(
    serving: Serving, handler: Handler
) -> None:
    class Silent(Handler):
        async def handle_request(self, method: str, params: Any) -> Any:
            raise KeyError()

    async with serving(Silent()) as (_, wire):
        await wire.request(1, "silent", None)
        assert (await wire.receive())["error"] == {
            "code": -32603,
            "message": "silent failed: KeyError",
        }


async def test_a_result_that_is_not_json_is_answered_internal_error(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(6, "unserializable", None)
        reply = await wire.receive()
        assert reply["id"] == 6
        assert reply["error"]["code"] == -32603
        await assert_still_serving(wire)


# --- $/cancel_request ------------------------------------------------------------------


async def test_cancel_request_cancels_that_in_flight_request_which_answers_request_cancelled(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request("a", "slow", "a")
        await wire.request("b", "slow", "b")
        await handler.started_event("a").wait()
        await handler.started_event("b").wait()
        await wire.notify("$/cancel_request", {"requestId": "a"})
        reply = await wire.receive()
        assert reply["id"] == "a"
        assert reply["error"]["code"] == -32800
        assert handler.cancelled == ["a"]
        handler.release.set()
        assert await wire.receive() == {"jsonrpc": "2.0", "id": "b", "result": "slow done"}


async def test_cancel_request_with_an_integer_id_cancels_that_request(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(12, "slow", "x")
        await handler.started_event("x").wait()
        await wire.notify("$/cancel_request", {"requestId": 12})
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (12, -32800)


async def test_cancel_request_for_an_unknown_or_malformed_id_is_ignored(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.notify("$/cancel_request", {"requestId": 999})
        await wire.notify("$/cancel_request", {"requestId": [1]})
        await wire.notify("$/cancel_request", {})
        await wire.notify("$/cancel_request", "nonsense")
        await assert_still_serving(wire)
        assert handler.notifications == []  # consumed by the endpoint, never the handler


# --- bad input -------------------------------------------------------------------------


async def test_malformed_json_is_answered_parse_error_with_a_null_id(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send_bytes(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        reply = await wire.receive()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32700
        await assert_still_serving(wire)


async def test_invalid_utf8_is_answered_parse_error(serving: Serving, handler: Handler) -> None:
    async with serving(handler) as (_, wire):
        await wire.send_bytes(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}\n')
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32700)
        await assert_still_serving(wire)


async def test_a_batch_array_is_answered_invalid_request_with_a_null_id(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send([{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": 1}])
        reply = await wire.receive()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32600
        await assert_still_serving(wire)


@pytest.mark.parametrize("message", [42, "x", None, True, 1.5])
async def test_a_message_that_is_not_an_object_is_answered_invalid_request(
    serving: Serving, handler: Handler, message: Any
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send(message)
        reply = await wire.receive()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32600
        await assert_still_serving(wire)


@pytest.mark.parametrize("bad_id", [1.5, True, False, {"n": 1}, [1], None])
async def test_a_request_with_an_invalid_id_type_is_answered_invalid_request(
    serving: Serving, handler: Handler, bad_id: Any
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send({"jsonrpc": "2.0", "id": bad_id, "method": "echo", "params": 1})
        reply = await wire.receive()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32600
        await assert_still_serving(wire)


async def test_a_message_with_neither_method_nor_result_is_answered_invalid_request(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send({"jsonrpc": "2.0", "id": 8})
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (8, -32600)
        await wire.send({"jsonrpc": "2.0", "method": 17})
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)
        await assert_still_serving(wire)


async def test_reusing_the_id_of_a_request_in_flight_is_invalid_and_spares_the_first(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.request(1, "slow", "first")
        await handler.started_event("first").wait()
        await wire.request(1, "echo", "second")
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)
        await wire.notify("$/cancel_request", {"requestId": 1})
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (1, -32800)
        assert handler.cancelled == ["first"]
        await wire.request(1, "echo", "id 1 is free again")
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": "id 1 is free again"}


async def test_an_over_limit_line_is_answered_invalid_request_and_the_next_message_works(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler, max_frame_bytes=1024) as (_, wire):
        big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": "x" * 4096})
        await wire.send_bytes(big[:1000].encode())
        await wire.send_bytes(big[1000:].encode() + b"\n")
        reply = await wire.receive()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32600
        await assert_still_serving(wire)
        await wire.send_bytes(big.encode() + b'\n{"jsonrpc":"2.0","id":2,"method":"echo"}\n')
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 2, "result": None}


async def test_a_64_mib_message_round_trips(serving: Serving, handler: Handler) -> None:
    payload = b"0123456789abcdef" * (4 << 20)  # 64 MiB
    frame = b'{"jsonrpc":"2.0","id":1,"method":"echo","params":"' + payload + b'"}'
    # About a second alone (most of it the endpoint's own JSON work); the limit only
    # guards against a hang on a heavily loaded machine.
    with anyio.fail_after(30):
        async with serving(handler) as (_, wire):
            for offset in range(0, len(frame), 1 << 20):  # as a pipe delivers it
                await wire.send_bytes(frame[offset : offset + (1 << 20)])
            await wire.send_bytes(b"\n")
            reply = await wire.receive_raw()
    prefix, suffix = b'{"jsonrpc":"2.0","id":1,"result":"', b'"}'
    assert reply.startswith(prefix)
    assert reply.endswith(suffix)
    assert reply[len(prefix) : -len(suffix)] == payload


async def test_a_reply_to_an_unknown_id_is_ignored(serving: Serving, handler: Handler) -> None:
    async with serving(handler) as (_, wire):
        await wire.send({"jsonrpc": "2.0", "id": 12345, "result": "nobody asked"})
        await wire.send({"jsonrpc": "2.0", "id": 12346, "error": {"code": 1, "message": "x"}})
        await assert_still_serving(wire)


# --- outbound requests -----------------------------------------------------------------


async def test_outbound_requests_are_correlated_by_id_when_replies_come_out_of_order(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (endpoint, wire), anyio.create_task_group() as tg:
        results: dict[str, Any] = {}

        async def ask(name: str) -> None:
            results[name] = await endpoint.request("client/ask", {"name": name})

        for name in ("one", "two", "three"):
            tg.start_soon(ask, name)
        requests = [await wire.receive() for _ in range(3)]
        assert {r["method"] for r in requests} == {"client/ask"}
        assert len({r["id"] for r in requests}) == 3
        for request in reversed(requests):
            name = request["params"]["name"]
            await wire.send({"jsonrpc": "2.0", "id": request["id"], "result": f"answer {name}"})
    assert results == {"one": "answer one", "two": "answer two", "three": "answer three"}


async def test_an_outbound_request_carries_jsonrpc_id_method_and_params(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (endpoint, wire), anyio.create_task_group() as tg:
        tg.start_soon(endpoint.request, "fs/read", {"path": "/a"})
        request = await wire.receive()
        assert request == {
            "jsonrpc": "2.0",
            "id": request["id"],
            "method": "fs/read",
            "params": {"path": "/a"},
        }
        await wire.send({"jsonrpc": "2.0", "id": request["id"], "result": None})


async def test_an_error_reply_raises_rpc_error_with_the_peers_code_message_and_data(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (endpoint, wire), anyio.create_task_group() as tg:
        caught: list[RpcError] = []

        async def ask() -> None:
            with pytest.raises(RpcError) as info:
                await endpoint.request("fs/read", {})
            caught.append(info.value)

        tg.start_soon(ask)
        request = await wire.receive()
        await wire.send(
            {
                "jsonrpc": "2.0",
                "id": request["id"],
                "error": {"code": -32002, "message": "no such file", "data": {"path": "/a"}},
            }
        )
    [error] = caught
    assert not isinstance(error, ConnectionClosed)
    assert (error.code, error.message, error.data) == (-32002, "no such file", {"path": "/a"})


async def test_a_malformed_error_reply_still_raises_rpc_error(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (endpoint, wire), anyio.create_task_group() as tg:
        caught: list[RpcError] = []

        async def ask() -> None:
            with pytest.raises(RpcError) as info:
                await endpoint.request("x", {})
            caught.append(info.value)

        tg.start_soon(ask)
        request = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "id": request["id"], "error": "just a string"})
    assert caught[0].code == -32603


async def test_when_input_ends_every_waiting_outbound_request_fails_with_connection_closed(
    serving: Serving, handler: Handler
) -> None:
    failures: list[BaseException] = []
    async with serving(handler) as (endpoint, wire):

        async def ask(number: int) -> None:
            try:
                await endpoint.request("client/ask", number)
            except ConnectionClosed as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            for number in range(3):
                tg.start_soon(ask, number)
            for _ in range(3):
                await wire.receive()
            await wire.close()
        assert len(failures) == 3
        assert endpoint.closed
        with pytest.raises(ConnectionClosed):
            await endpoint.request("client/ask", "late")


async def test_an_outbound_request_from_a_handler_fails_when_input_ends(
    serving: Serving, handler: Handler
) -> None:
    class Asking(Handler):
        async def handle_request(self, method: str, params: Any) -> Any:
            assert self.endpoint is not None
            return await self.endpoint.request("client/ask", params)

    asking = Asking()
    async with serving(asking, drain_timeout=2.0) as (endpoint, wire):
        asking.endpoint = endpoint
        await wire.request(1, "delegate", "q")
        outbound = await wire.receive()
        assert outbound["method"] == "client/ask"
        await wire.close()
        reply = await wire.receive()
        assert reply["id"] == 1
        assert reply["error"]["code"] == -32603
        assert "closed" in reply["error"]["message"]


# --- end of input ----------------------------------------------------------------------


async def test_a_request_running_when_input_ends_is_still_answered(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler, drain_timeout=2.0) as (_, wire):
        await wire.request(1, "sleep", 0.05)
        await wire.close()
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": "slept"}


async def test_a_request_outliving_the_drain_timeout_is_answered_request_cancelled(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler, drain_timeout=0.05) as (_, wire):
        await wire.request(1, "slow", "forever")
        await handler.started_event("forever").wait()
        await wire.close()
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (1, -32800)
        assert handler.cancelled == ["forever"]


async def test_serve_returns_when_input_ends(handler: Handler) -> None:
    to_endpoint, endpoint_input = anyio.create_memory_object_stream[bytes](16)
    endpoint_output, from_endpoint = anyio.create_memory_object_stream[bytes](16)
    endpoint = Endpoint(StreamSource(endpoint_input), StreamSink(endpoint_output))
    await to_endpoint.send(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":2}\n')
    await to_endpoint.aclose()
    with anyio.fail_after(5):
        await endpoint.serve(handler)
    assert from_endpoint.receive_nowait() == b'{"jsonrpc":"2.0","id":1,"result":2}\n'


class SlowSink:
    """A sink that takes a while per write, as a thread writing to a pipe does."""

    def __init__(self) -> None:
        self.written = bytearray()

    async def write(self, data: bytes) -> None:
        await anyio.sleep(0.02)
        self.written += data


async def test_serve_flushes_every_answer_queued_behind_a_slow_write_when_input_ends(
    handler: Handler,
) -> None:
    to_endpoint, endpoint_input = anyio.create_memory_object_stream[bytes](1)
    sink = SlowSink()
    endpoint = Endpoint(StreamSource(endpoint_input), sink)
    await to_endpoint.send(
        b'{"jsonrpc":"2.0","id":1,"method":"echo","params":1}\n'
        b'{"jsonrpc":"2.0","id":2,"method":"sleep","params":0.005}\n'
    )
    await to_endpoint.aclose()
    with anyio.fail_after(5):
        await endpoint.serve(handler)
    assert [json.loads(line)["id"] for line in sink.written.splitlines()] == [1, 2]


# --- work after the answer ---------------------------------------------------------------


async def test_a_follow_up_runs_after_its_response_is_written(serving: Serving) -> None:
    flushed: list[bool] = []

    class Following(Handler):
        async def handle_request(self, method: str, params: Any) -> Any:
            if method != "follow":
                return await super().handle_request(method, params)

            async def follow_up() -> None:
                assert self.endpoint is not None
                await self.endpoint.flush()
                flushed.append(True)
                await self.endpoint.notify("after", {})

            return FollowedBy({"answered": True}, follow_up)

    handler = Following()
    async with serving(handler) as (endpoint, wire):
        handler.endpoint = endpoint
        await wire.request(1, "follow")
        first = await wire.receive()
        second = await wire.receive()
    assert first == {"jsonrpc": "2.0", "id": 1, "result": {"answered": True}}
    assert second["method"] == "after"
    assert flushed == [True]
