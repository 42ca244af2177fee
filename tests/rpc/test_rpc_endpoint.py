from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from functools import partial
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

    def receive_request(self, method: str, params: Any) -> Any:
        return partial(self.handle_request, method, params)

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


async def test_a_follow_up_starts_only_once_its_response_is_written(handler: Handler) -> None:
    """The follow-up's work (a session's tools, the warm-up) must not hold up the answer:
    it starts when the answer is written, not when it is queued for a slow writer."""
    seen_at_start: list[bytes] = []

    class Following(Handler):
        async def handle_request(self, method: str, params: Any) -> Any:
            async def follow_up() -> None:
                seen_at_start.append(bytes(sink.written))

            return FollowedBy({"answered": True}, follow_up)

    to_endpoint, endpoint_input = anyio.create_memory_object_stream[bytes](1)
    sink = SlowSink()
    endpoint = Endpoint(StreamSource(endpoint_input), sink)
    await to_endpoint.send(b'{"jsonrpc":"2.0","id":1,"method":"follow"}\n')
    await to_endpoint.aclose()
    with anyio.fail_after(5):
        await endpoint.serve(Following())
    assert seen_at_start == [b'{"jsonrpc":"2.0","id":1,"result":{"answered":true}}\n']


# --- no frame can end the connection (issue 7) ------------------------------------------


async def test_a_line_nested_100000_levels_deep_is_answered_parse_error(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32700)
        params = b'{"jsonrpc":"2.0","id":1,"method":"echo","params":' + b"[" * 100_000
        await wire.send_bytes(params + b"]" * 100_000 + b"}\n")
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32700)
        await assert_still_serving(wire)


async def test_an_integer_id_with_more_than_4300_digits_is_answered_parse_error(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send_bytes(b'{"jsonrpc":"2.0","id":' + b"7" * 5000 + b',"method":"echo"}\n')
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32700)
        assert len(reply["error"]["message"]) < 200
        await assert_still_serving(wire)


async def test_a_lone_surrogate_is_read_as_u_fffd_but_an_id_is_echoed_as_sent(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send_bytes(b'{"jsonrpc":"2.0","id":1,"method":"no/such\\ud800"}\n')
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (1, -32601)
        assert "no/such\ufffd" in reply["error"]["message"]
        await wire.send_bytes(
            b'{"jsonrpc":"2.0","id":"\\udfff","method":"echo","params":"\\ud83d"}\n'
        )
        raw = await wire.receive_raw()
        assert raw.isascii()  # the id's lone surrogate goes back as an escape
        assert json.loads(raw) == {"jsonrpc": "2.0", "id": "\udfff", "result": "\ufffd"}
        await assert_still_serving(wire)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
async def test_numbers_json_cannot_carry_are_answered_parse_error(
    serving: Serving, handler: Handler, number: str
) -> None:
    async with serving(handler) as (_, wire):
        frame = '{"jsonrpc":"2.0","id":1,"method":"echo","params":[' + number + "]}\n"
        await wire.send_bytes(frame.encode())
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32700)
        await assert_still_serving(wire)


async def test_a_receive_request_that_raises_is_answered_internal_error_for_that_request_only(
    serving: Serving,
) -> None:
    class Refusing(Handler):
        def receive_request(self, method: str, params: Any) -> Any:
            if method == "refuse":
                raise LookupError("no queue for that session")
            return super().receive_request(method, params)

    handler = Refusing()
    async with serving(handler) as (_, wire):
        await wire.request(1, "slow", "first")
        await handler.started_event("first").wait()
        await wire.request(2, "refuse", {})
        assert await wire.receive() == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32603,
                "message": "refuse failed: LookupError: no queue for that session",
            },
        }
        await wire.request(2, "echo", "id 2 is free again")
        assert (await wire.receive())["result"] == "id 2 is free again"
        handler.release.set()
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": "slow done"}


async def test_a_receive_request_that_raises_rpc_error_is_answered_with_that_error(
    serving: Serving,
) -> None:
    class Unknown(Handler):
        def receive_request(self, method: str, params: Any) -> Any:
            raise RpcError(-32601, f"method not found: {method}")

    async with serving(Unknown()) as (_, wire):
        await wire.request(1, "nope", {})
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (1, -32601)


async def test_a_handle_notification_that_raises_leaves_the_connection_serving(
    serving: Serving,
) -> None:
    class Exploding(Handler):
        async def handle_notification(self, method: str, params: Any) -> None:
            raise RuntimeError("the notification handler broke")

    async with serving(Exploding()) as (_, wire):
        await wire.notify("session/cancel", {"sessionId": "s"})
        await assert_still_serving(wire)


async def test_a_result_nested_too_deeply_to_write_is_answered_internal_error(
    serving: Serving,
) -> None:
    class Deep(Handler):
        async def handle_request(self, method: str, params: Any) -> Any:
            if method != "deep":
                return await super().handle_request(method, params)
            result: list[Any] = []
            for _ in range(100_000):
                result = [result]
            return result

    async with serving(Deep()) as (_, wire):
        await wire.request(1, "deep", None)
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (1, -32603)
        await assert_still_serving(wire)


async def test_an_error_whose_data_is_not_json_is_answered_internal_error(
    serving: Serving,
) -> None:
    class BadData(Handler):
        async def handle_request(self, method: str, params: Any) -> Any:
            if method != "bad_data":
                return await super().handle_request(method, params)
            raise RpcError(-32602, "bad params", {"field": object()})

    async with serving(BadData()) as (_, wire):
        await wire.request(1, "bad_data", None)
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (1, -32603)
        await assert_still_serving(wire)


async def test_a_huge_method_name_is_quoted_short_in_the_endpoints_own_messages(
    serving: Serving,
) -> None:
    class Failing(Handler):
        async def handle_request(self, method: str, params: Any) -> Any:
            raise ValueError("broken")

    async with serving(Failing()) as (_, wire):
        await wire.request(1, "m" * 100_000, None)
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (1, -32603)
        assert len(reply["error"]["message"]) < 200
        assert reply["error"]["message"].endswith("failed: ValueError: broken")


async def test_an_error_response_with_a_null_id_is_ignored_never_answered(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (_, wire):
        # As Toad sent in reply to one of our notifications.
        error = {"code": -32600, "message": "Invalid Request"}
        await wire.send({"jsonrpc": "2.0", "id": None, "error": error})
        await wire.send({"jsonrpc": "2.0", "error": error})
        await wire.send({"jsonrpc": "2.0", "id": None, "result": None})
        await assert_still_serving(wire)


@pytest.mark.parametrize("bad_id", [1.5, True, [1], {"n": 1}])
async def test_a_response_with_an_id_of_the_wrong_type_is_ignored_never_answered(
    serving: Serving, handler: Handler, bad_id: Any
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send({"jsonrpc": "2.0", "id": bad_id, "result": "x"})
        await wire.send({"jsonrpc": "2.0", "id": bad_id, "error": {"code": 1, "message": "x"}})
        await assert_still_serving(wire)


@pytest.mark.parametrize("batch", [[], [{"jsonrpc": "2.0", "id": 1, "method": "echo"}] * 3])
async def test_a_batch_of_any_length_is_answered_with_one_invalid_request(
    serving: Serving, handler: Handler, batch: list[Any]
) -> None:
    async with serving(handler) as (_, wire):
        await wire.send(batch)
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)
        await assert_still_serving(wire)


async def test_an_unexpected_failure_inside_the_endpoint_answers_that_request_internal_error(
    serving: Serving, handler: Handler, monkeypatch: pytest.MonkeyPatch
) -> None:
    receive_call = Endpoint._receive_call

    async def tripping(self: Endpoint, tg: Any, handler: Any, message: dict[str, Any]) -> None:
        if message.get("method") == "trip":
            raise RuntimeError("a bug in the endpoint")
        await receive_call(self, tg, handler, message)

    monkeypatch.setattr(Endpoint, "_receive_call", tripping)
    async with serving(handler) as (_, wire):
        await wire.request(1, "trip", None)
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == (1, -32603)
        assert "a bug" not in reply["error"]["message"]
        await wire.notify("trip")  # a notification: logged, never answered
        await assert_still_serving(wire)


# --- giving up politely: $/cancel_request for what we stop waiting for ------------------


def cancel_request(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request_id}}


class Asking(Handler):
    """`delegate` asks the peer and answers with the peer's answer."""

    async def handle_request(self, method: str, params: Any) -> Any:
        if method != "delegate":
            return await super().handle_request(method, params)
        assert self.endpoint is not None
        return await self.endpoint.request("session/request_permission", params)


async def test_an_outbound_request_whose_caller_is_cancelled_sends_cancel_request_for_its_id(
    serving: Serving,
) -> None:
    asking = Asking()
    async with serving(asking) as (endpoint, wire):
        asking.endpoint = endpoint
        await wire.request("prompt-1", "delegate", {"tool": "edit"})
        outbound = await wire.receive()
        await wire.notify("$/cancel_request", {"requestId": "prompt-1"})
        assert await wire.receive() == cancel_request(outbound["id"])
        reply = await wire.receive()
        assert (reply["id"], reply["error"]["code"]) == ("prompt-1", -32800)


async def test_an_outbound_request_whose_task_group_is_cancelled_sends_cancel_request(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (endpoint, wire):
        async with anyio.create_task_group() as tg:
            tg.start_soon(endpoint.request, "session/request_permission", {})
            outbound = await wire.receive()
            tg.cancel_scope.cancel()
        assert await wire.receive() == cancel_request(outbound["id"])
        await assert_still_serving(wire)


async def test_an_outbound_request_that_times_out_sends_cancel_request(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (endpoint, wire):
        with anyio.move_on_after(0.05) as timeout:
            await endpoint.request("session/request_permission", {})
        assert timeout.cancelled_caught
        outbound = await wire.receive()
        assert outbound["method"] == "session/request_permission"
        assert await wire.receive() == cancel_request(outbound["id"])


async def test_an_answered_outbound_request_sends_no_cancel_request(
    serving: Serving, handler: Handler
) -> None:
    async with serving(handler) as (endpoint, wire):
        async with anyio.create_task_group() as tg:
            tg.start_soon(endpoint.request, "fs/read_text_file", {})
            outbound = await wire.receive()
            await wire.send({"jsonrpc": "2.0", "id": outbound["id"], "result": {}})
        await assert_still_serving(wire)  # the next frame is this answer, not a cancel


async def test_a_late_answer_to_a_request_given_up_is_dropped_quietly(
    serving: Serving, handler: Handler, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="acp_agent.rpc")
    async with serving(handler) as (endpoint, wire):
        with anyio.move_on_after(0.05):
            await endpoint.request("session/request_permission", {})
        outbound = await wire.receive()
        assert await wire.receive() == cancel_request(outbound["id"])
        await wire.send({"jsonrpc": "2.0", "id": outbound["id"], "error": {"code": -32800}})
        await assert_still_serving(wire)
    records = [r for r in caplog.records if r.name == "acp_agent.rpc.endpoint"]  # not frames
    assert [r.levelno for r in records] == [logging.DEBUG]
    assert "abandoned" in records[0].getMessage()
