"""One JSON-RPC 2.0 connection: inbound requests run concurrently, outbound requests are
correlated by id, and a single writer keeps frames in the order they were sent.

The endpoint knows nothing of the protocol above it: methods are strings, params are
whatever JSON the peer sent.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from .errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    ConnectionClosed,
    RpcError,
)
from .framing import MAX_FRAME_BYTES, ByteSink, ByteSource, read_lines

log = logging.getLogger(__name__)

RequestId = int | str
CANCEL_REQUEST = "$/cancel_request"
WIND_DOWN_SECONDS = 0.5


class Handler(Protocol):
    async def handle_request(self, method: str, params: Any) -> Any:
        """The result of a request; raise `RpcError` to answer with an error."""
        ...

    async def handle_notification(self, method: str, params: Any) -> None:
        """Runs inline in the reader: it must return promptly."""
        ...


@dataclass(frozen=True, slots=True)
class FollowedBy:
    """A result plus work to run once the response is written (e.g. notifications that
    must reach the peer after it has learnt an id from the response)."""

    result: Any
    follow_up: Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Reply:
    result: Any = None
    error: RpcError | None = None


class Endpoint:
    def __init__(
        self,
        source: ByteSource,
        sink: ByteSink,
        *,
        outbox_size: int = 1024,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        self._source = source
        self._sink = sink
        self._max_frame_bytes = max_frame_bytes
        self._outbox_send, self._outbox_receive = anyio.create_memory_object_stream[bytes](
            outbox_size
        )
        self._next_id = itertools.count()
        self._waiting: dict[RequestId, MemoryObjectSendStream[_Reply]] = {}
        self._in_flight: dict[RequestId, anyio.CancelScope] = {}
        self._closed = anyio.Event()
        self._frames_queued = 0
        self._frames_done = 0
        self._frames_progress = anyio.Event()
        self._drained = anyio.Event()

    # --- running -----------------------------------------------------------------------

    async def serve(
        self,
        handler: Handler,
        *,
        drain_timeout: float = 2.0,
        on_drain_timeout: Callable[[], None] | None = None,
    ) -> None:
        """Serve until the input ends.

        Then outbound waiters fail with `ConnectionClosed`, requests still running get
        `drain_timeout` seconds to answer (input from a file ends before the work does).
        Past that, `on_drain_timeout` may wind work down so it answers on its own terms
        (a brief grace); what still runs is cancelled (and answers `REQUEST_CANCELLED`),
        and queued frames are flushed before returning.
        """
        async with anyio.create_task_group() as writer:
            writer.start_soon(self._write_frames)
            async with anyio.create_task_group() as requests:
                async for line in read_lines(self._source, self._max_frame_bytes):
                    await self._receive_frame(requests, handler, line)
                self._closed.set()
                self._wake_waiters()
                if self._in_flight:
                    with anyio.move_on_after(drain_timeout):
                        await self._drained.wait()
                if self._in_flight and on_drain_timeout is not None:
                    on_drain_timeout()
                    with anyio.move_on_after(WIND_DOWN_SECONDS):
                        await self._drained.wait()
                for scope in self._in_flight.values():
                    scope.cancel()  # each still answers, with REQUEST_CANCELLED
            self._outbox_send.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    # --- outbound ----------------------------------------------------------------------

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the peer and wait for its answer; errors raise `RpcError`."""
        if self.closed:
            raise ConnectionClosed()
        request_id = next(self._next_id)
        reply_send, reply_receive = anyio.create_memory_object_stream[_Reply](1)
        self._waiting[request_id] = reply_send
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            try:
                reply = await reply_receive.receive()
            except anyio.EndOfStream:
                raise ConnectionClosed() from None
        finally:
            self._waiting.pop(request_id, None)
            reply_receive.close()
        if reply.error is not None:
            raise reply.error
        return reply.result

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    # --- inbound -----------------------------------------------------------------------

    async def _receive_frame(self, tg: TaskGroup, handler: Handler, line: bytes) -> None:
        if not line:
            await self._send_error(None, RpcError(INVALID_REQUEST, "message too large"))
            return
        try:
            message = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            await self._send_error(None, RpcError(PARSE_ERROR, f"parse error: {exc}"))
            return
        if isinstance(message, list):
            await self._send_error(
                None, RpcError(INVALID_REQUEST, "batch requests are not supported")
            )
            return
        if not isinstance(message, dict):
            await self._send_error(
                None, RpcError(INVALID_REQUEST, "a message must be a JSON object")
            )
            return

        raw_id = message.get("id")
        message_id = raw_id if _is_valid_id(raw_id) else None
        method = message.get("method")
        if "id" in message and message_id is None:
            await self._send_error(
                None, RpcError(INVALID_REQUEST, "id must be a string or an integer")
            )
        elif isinstance(method, str) and message_id is not None and message_id in self._in_flight:
            # Answering under that id would pose as the answer to the first request.
            await self._send_error(
                None,
                RpcError(
                    INVALID_REQUEST, f"id {message_id!r} is already used by a request in flight"
                ),
            )
        elif isinstance(method, str) and message_id is not None:
            self._start_request(tg, handler, message_id, method, message.get("params"))
        elif isinstance(method, str):
            await self._receive_notification(handler, method, message.get("params"))
        elif message_id is not None and ("result" in message or "error" in message):
            self._receive_reply(message_id, message)
        else:
            await self._send_error(
                message_id,
                RpcError(
                    INVALID_REQUEST, "a message needs a method, or an id with a result or error"
                ),
            )

    def _start_request(
        self, tg: TaskGroup, handler: Handler, request_id: RequestId, method: str, params: Any
    ) -> None:
        scope = anyio.CancelScope()
        self._in_flight[request_id] = scope
        tg.start_soon(self._answer_request, handler, scope, request_id, method, params)

    async def _answer_request(
        self,
        handler: Handler,
        scope: anyio.CancelScope,
        request_id: RequestId,
        method: str,
        params: Any,
    ) -> None:
        try:
            reply = await self._outcome(handler, scope, method, params)
            if reply.error is None:
                result = reply.result
                follow_up = None
                if isinstance(result, FollowedBy):
                    result, follow_up = result.result, result.follow_up
                try:
                    await self._send({"jsonrpc": "2.0", "id": request_id, "result": result})
                    if follow_up is not None:
                        await self._run_follow_up(method, follow_up)
                    return
                except (TypeError, ValueError) as exc:
                    log.error("%s returned a result that is not JSON: %s", method, exc)
                    reply = _Reply(
                        error=RpcError(INTERNAL_ERROR, f"{method} produced an invalid result")
                    )
            assert reply.error is not None
            await self._send_error(request_id, reply.error)
        finally:
            # In flight until answered: the drain at end of input waits for the answer too.
            if self._in_flight.get(request_id) is scope:
                del self._in_flight[request_id]
            if self.closed and not self._in_flight:
                self._drained.set()

    async def _run_follow_up(self, method: str, follow_up: Callable[[], Awaitable[None]]) -> None:
        try:
            await follow_up()
        except Exception:
            log.exception("follow-up of %s failed", method)

    async def _outcome(
        self, handler: Handler, scope: anyio.CancelScope, method: str, params: Any
    ) -> _Reply:
        reply = _Reply(error=RpcError(REQUEST_CANCELLED, f"{method} was cancelled"))
        try:
            with scope:
                reply = _Reply(result=await handler.handle_request(method, params))
        except RpcError as exc:
            reply = _Reply(error=exc)
        except Exception as exc:
            log.exception("%s failed", method)
            reply = _Reply(error=RpcError(INTERNAL_ERROR, _short_failure(method, exc)))
        return reply

    async def _receive_notification(self, handler: Handler, method: str, params: Any) -> None:
        if method == CANCEL_REQUEST:
            request_id = params.get("requestId") if isinstance(params, dict) else None
            scope = self._in_flight.get(request_id) if _is_valid_id(request_id) else None
            if scope is not None:
                scope.cancel()
            return
        try:
            await handler.handle_notification(method, params)
        except RpcError as exc:
            log.warning("notification %s ignored: %s", method, exc.message)
        except Exception:
            log.exception("notification %s failed", method)

    def _receive_reply(self, request_id: RequestId, message: dict[str, Any]) -> None:
        waiter = self._waiting.pop(request_id, None)
        if waiter is None:
            log.warning("reply to unknown request id %r ignored", request_id)
            return
        error = message.get("error")
        if error is not None:
            reply = _Reply(error=_error_from_wire(error))
        else:
            reply = _Reply(result=message.get("result"))
        # The requester may have stopped waiting (cancelled).
        with contextlib.suppress(
            anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError
        ):
            waiter.send_nowait(reply)
        waiter.close()

    def _wake_waiters(self) -> None:
        for waiter in self._waiting.values():
            waiter.close()
        self._waiting.clear()

    # --- writing -----------------------------------------------------------------------

    async def _send_error(self, request_id: RequestId | None, error: RpcError) -> None:
        await self._send({"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()})

    async def _send(self, message: dict[str, Any]) -> None:
        frame = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        try:
            await self._outbox_send.send(frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise ConnectionClosed() from None
        self._frames_queued += 1

    async def flush(self) -> None:
        """Wait until every frame sent so far has been written (or dropped: peer gone)."""
        target = self._frames_queued
        while self._frames_done < target:
            await self._frames_progress.wait()

    async def _write_frames(self) -> None:
        """The one writer: drains whatever is queued into a single write."""
        broken = False
        async with self._outbox_receive:
            async for frame in self._outbox_receive:
                batch = [frame]
                while True:
                    try:
                        batch.append(self._outbox_receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break  # EndOfStream: the outbox closed; the loop ends after this write
                if not broken:  # else keep draining so senders never block on a dead peer
                    try:
                        await self._sink.write(b"".join(batch))
                    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                        log.warning("output closed, dropping further messages: %s", exc)
                        broken = True
                self._frames_done += len(batch)
                self._frames_progress.set()
                self._frames_progress = anyio.Event()


def _short_failure(method: str, exc: Exception, limit: int = 300) -> str:
    """One line for the peer: the exception type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    detail = lines[0].strip() if lines else ""
    if len(detail) > limit:
        detail = detail[: limit - 3] + "..."
    return f"{method} failed: {type(exc).__name__}" + (f": {detail}" if detail else "")


def _is_valid_id(value: Any) -> TypeGuard[RequestId]:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _error_from_wire(error: Any) -> RpcError:
    if isinstance(error, dict):
        code = error.get("code")
        return RpcError(
            code if isinstance(code, int) else INTERNAL_ERROR,
            str(error.get("message", "error without message")),
            error.get("data"),
        )
    return RpcError(INTERNAL_ERROR, f"malformed error from peer: {error!r}")


__all__ = ["CANCEL_REQUEST", "METHOD_NOT_FOUND", "Endpoint", "Handler", "RequestId"]
