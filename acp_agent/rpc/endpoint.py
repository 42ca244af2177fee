"""One JSON-RPC 2.0 connection: inbound requests run concurrently, outbound requests are
correlated by id, and a single writer keeps frames in the order they were sent.

The endpoint knows nothing of the protocol above it: methods are strings, params are
whatever JSON the peer sent.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from ._batch import Alone, Answers, error_frame, is_response, receive_batch
from ._frame_log import log_frame
from .errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    ConnectionClosed,
    RpcError,
)
from .framing import (
    MAX_FRAME_BYTES,
    NOT_JSON,
    ByteSink,
    ByteSource,
    decode_frame,
    encode_frame,
    read_lines,
)

log = logging.getLogger(__name__)

RequestId = int | str
CANCEL_REQUEST = "$/cancel_request"
WIND_DOWN_SECONDS = 0.5
GIVE_UP_SECONDS = 0.5
"""How long a cancelled caller may wait to queue its `$/cancel_request` (outbox full)."""
REMEMBERED_ABANDONED = 1024
"""Ids of given-up requests remembered, so their late answers are dropped quietly."""


Work = Callable[[], Awaitable[Any]]
"""What answers one request: its result, or raise `RpcError` to answer with an error."""


class Handler(Protocol):
    def receive_request(self, method: str, params: Any) -> Work:
        """Called by the reader in frame order, before the next frame is read.

        Whatever a later frame may depend on is recorded here (a prompt's place in its
        session's queue, which a cancel in the very next frame must find); the work it
        returns runs later, in the request's own task and cancel scope.
        """
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


@dataclass(frozen=True, slots=True)
class _Inbound:
    """One request being answered: its work runs in `scope`, its response goes to
    `answers` (alone, or into its batch's array)."""

    request_id: RequestId
    method: str
    work: Work
    scope: anyio.CancelScope
    answers: Answers


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
        self._abandoned: dict[RequestId, None] = {}  # insertion-ordered, oldest first
        self._in_flight: dict[RequestId, anyio.CancelScope] = {}
        self._closed = anyio.Event()
        self._frames_queued = 0
        self._frames_done = 0
        self._frames_progress = anyio.Event()
        self._drained = anyio.Event()
        self._alone = Alone(self._queue)
        self.accept_batches = False
        """Answer JSON-RPC batches (arrays) instead of refusing them: the protocol above
        turns it on where its version has them (ACP v2). We never send batches."""

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
        """Send a request to the peer and wait for its answer; errors raise `RpcError`.

        A caller that gives up (is cancelled) tells the peer with `$/cancel_request`, so
        the peer can stop the work and close what it shows for it (a permission dialog).
        """
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
            except anyio.get_cancelled_exc_class():
                await self._give_up(request_id)
                raise
        finally:
            self._waiting.pop(request_id, None)
            reply_receive.close()
        if reply.error is not None:
            raise reply.error
        return reply.result

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _give_up(self, request_id: RequestId) -> None:
        """Send `$/cancel_request` for a request still unanswered, and remember its id so
        a late answer is dropped quietly.

        Shielded (the caller is being cancelled) but bounded, so a full outbox cannot hold
        the cancellation up for long; pointless once the connection has closed.
        """
        if self.closed or self._waiting.pop(request_id, None) is None:
            return  # nobody left to tell, or the answer is already here
        self._abandoned[request_id] = None
        if len(self._abandoned) > REMEMBERED_ABANDONED:
            del self._abandoned[next(iter(self._abandoned))]
        with anyio.move_on_after(GIVE_UP_SECONDS, shield=True):
            with contextlib.suppress(ConnectionClosed):
                await self.notify(CANCEL_REQUEST, {"requestId": request_id})

    # --- inbound -----------------------------------------------------------------------

    async def _receive_frame(self, tg: TaskGroup, handler: Handler, line: bytes) -> None:
        """Answer one frame as JSON-RPC says, or not at all (notifications, responses).

        Never raises: one frame, whatever its bytes, must not end the reader and with it
        the connection. What still fails unexpectedly is logged, and a request the
        failure left unanswered gets -32603.
        """
        message: Any = None
        log_frame("in", line)
        try:
            try:
                message = decode_frame(line)
            except RpcError as exc:
                await self._send_error(None, exc)
                return
            await self._dispatch(tg, handler, message)
        except Exception:
            log.exception("unexpected failure while handling a frame")
            await self._answer_unexpected(message)

    async def _dispatch(self, tg: TaskGroup, handler: Handler, message: Any) -> None:
        if isinstance(message, list) and self.accept_batches:
            await receive_batch(
                message,
                self._queue,
                on_response=self._receive_response,
                on_call=functools.partial(self._receive_call, tg, handler),
            )
        elif isinstance(message, list):
            await self._send_error(
                None, RpcError(INVALID_REQUEST, "batch requests are not supported")
            )
        elif not isinstance(message, dict):
            await self._send_error(
                None, RpcError(INVALID_REQUEST, "a message must be a JSON object")
            )
        elif is_response(message):
            self._receive_response(message)  # never answered, whatever its id
        else:
            await self._receive_call(tg, handler, message)

    async def _receive_call(
        self,
        tg: TaskGroup,
        handler: Handler,
        message: dict[str, Any],
        answers: Answers | None = None,
    ) -> None:
        """A request or a notification, or an invalid message answered -32600; `answers`:
        its batch's, when it came in one."""
        answers = self._alone if answers is None else answers
        raw_id = message.get("id")
        method = message.get("method")
        if "id" in message and not _is_valid_id(raw_id):
            await answers.reject(
                None, RpcError(INVALID_REQUEST, "id must be a string or an integer")
            )
        elif not isinstance(method, str):
            await answers.reject(
                raw_id if _is_valid_id(raw_id) else None,
                RpcError(
                    INVALID_REQUEST, "a message needs a method, or an id with a result or error"
                ),
            )
        elif not _is_valid_id(raw_id):  # no id at all: a notification
            await self._receive_notification(handler, method, message.get("params"))
        elif raw_id in self._in_flight:
            # Answering under that id would pose as the answer to the first request.
            in_use = f"id {_clip(repr(raw_id))} is already used by a request in flight"
            await answers.reject(None, RpcError(INVALID_REQUEST, in_use))
        else:
            answers.owe()
            self._start_request(tg, handler, raw_id, method, message.get("params"), answers)

    async def _answer_unexpected(self, message: Any) -> None:
        """The last line of defence: -32603 for a request whose frame failed before its
        task was started (a started one answers for itself)."""
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return
        request_id = message.get("id")
        if not _is_valid_id(request_id) or request_id in self._in_flight:
            return
        try:
            await self._send_error(request_id, RpcError(INTERNAL_ERROR, "internal error"))
        except Exception:
            log.exception("could not answer request %s", _clip(repr(request_id)))

    def _start_request(
        self,
        tg: TaskGroup,
        handler: Handler,
        request_id: RequestId,
        method: str,
        params: Any,
        answers: Answers,
    ) -> None:
        scope = anyio.CancelScope()
        self._in_flight[request_id] = scope
        call = _Inbound(request_id, method, _accept(handler, method, params), scope, answers)
        tg.start_soon(self._answer_request, call)

    async def _answer_request(self, call: _Inbound) -> None:
        """Run one request in its own task and write its one response.

        Never raises: an exception escaping this task would end the connection's task
        group, so whatever `_respond` did not foresee still answers -32603.
        """
        try:
            await self._respond(call)
        except Exception:  # raised before the response was queued: the follow-up never raises
            log.exception("answering %s failed", _clip(call.method))
            with contextlib.suppress(Exception):
                failure = RpcError(INTERNAL_ERROR, f"{_clip(call.method)} failed")
                await call.answers.add(error_frame(call.request_id, failure))
        finally:
            # In flight until answered: the drain at end of input waits for the answer too.
            if self._in_flight.get(call.request_id) is call.scope:
                del self._in_flight[call.request_id]
            if self.closed and not self._in_flight:
                self._drained.set()

    async def _respond(self, call: _Inbound) -> None:
        """Write the work's outcome (a response JSON cannot carry becomes -32603), then
        run its follow-up, if any, once the response is written (for a batch entry: the
        batch's array): its work must not hold up the answer's write."""
        reply = await self._outcome(call)
        follow_up = None
        if isinstance(reply.result, FollowedBy):
            reply, follow_up = _Reply(result=reply.result.result), reply.result.follow_up
        try:
            frame = encode_frame(_response(call.request_id, reply))
        except NOT_JSON as exc:
            log.error("%s produced a response that is not JSON: %s", _clip(call.method), exc)
            follow_up = None
            failure = RpcError(INTERNAL_ERROR, f"{_clip(call.method)} produced an invalid result")
            frame = error_frame(call.request_id, failure)
        await call.answers.add(frame)
        await call.answers.sent()
        if follow_up is not None:
            await self.flush()
            await self._run_follow_up(call.method, follow_up)

    async def _run_follow_up(self, method: str, follow_up: Callable[[], Awaitable[None]]) -> None:
        try:
            await follow_up()
        except Exception:
            log.exception("follow-up of %s failed", _clip(method))

    async def _outcome(self, call: _Inbound) -> _Reply:
        method = call.method
        reply = _Reply(error=RpcError(REQUEST_CANCELLED, f"{_clip(method)} was cancelled"))
        try:
            with call.scope:
                reply = _Reply(result=await call.work())
        except RpcError as exc:
            reply = _Reply(error=exc)
        except Exception as exc:
            log.exception("%s failed", _clip(method))
            reply = _Reply(error=RpcError(INTERNAL_ERROR, short_failure(method, exc)))
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
            log.warning("notification %s ignored: %s", _clip(method), exc.message)
        except Exception:
            log.exception("notification %s failed", _clip(method))

    def _receive_response(self, message: dict[str, Any]) -> None:
        """Hand a response to the request waiting for it. A response is never answered:
        one that matches no waiting request (a late answer to a request we gave up on,
        a peer's error about a frame it could not read, with id null) is only logged."""
        request_id = message.get("id")
        waiter = self._waiting.pop(request_id, None) if _is_valid_id(request_id) else None
        if waiter is None:
            self._drop_response(request_id, message)
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

    def _drop_response(self, request_id: Any, message: dict[str, Any]) -> None:
        if _is_valid_id(request_id) and request_id in self._abandoned:
            del self._abandoned[request_id]
            log.debug("late answer to abandoned request %s dropped", _clip(repr(request_id)))
        else:
            log.warning(
                "response to no request of ours ignored (id %s)%s",
                _describe_id(request_id),
                _error_note(message),
            )

    def _wake_waiters(self) -> None:
        for waiter in self._waiting.values():
            waiter.close()
        self._waiting.clear()

    # --- writing -----------------------------------------------------------------------

    async def _send_error(self, request_id: RequestId | None, error: RpcError) -> None:
        await self._queue(error_frame(request_id, error))

    async def _send(self, message: dict[str, Any]) -> None:
        await self._queue(encode_frame(message))

    async def _queue(self, frame: bytes) -> None:
        log_frame("out", frame)
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


def _accept(handler: Handler, method: str, params: Any) -> Work:
    """The handler's work for a request. A handler that fails even to accept it gets work
    failing the same way, so that answer too is written in the one place."""
    try:
        return handler.receive_request(method, params)
    except Exception as exc:
        failure = exc

        async def fail() -> Any:
            raise failure

        return fail


def _response(request_id: RequestId, reply: _Reply) -> dict[str, Any]:
    if reply.error is not None:
        return {"jsonrpc": "2.0", "id": request_id, "error": reply.error.to_dict()}
    return {"jsonrpc": "2.0", "id": request_id, "result": reply.result}


def short_failure(method: str, exc: Exception, limit: int = 300) -> str:
    """One line for the peer: the exception type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    detail = lines[0].strip() if lines else ""
    if len(detail) > limit:
        detail = detail[: limit - 3] + "..."
    return f"{_clip(method)} failed: {type(exc).__name__}" + (f": {detail}" if detail else "")


def _clip(text: str, limit: int = 100) -> str:
    """A peer-chosen string (method, id) short enough to quote in a message or a log."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe_id(value: Any) -> str:
    if value is None:
        return "null"
    return _clip(repr(value)) if _is_valid_id(value) else f"of type {type(value).__name__}"


def _error_note(message: dict[str, Any]) -> str:
    """The peer's error message, if the response carries one, for the log."""
    error = message.get("error")
    text = error.get("message") if isinstance(error, dict) else None
    return f": {_clip(text)}" if isinstance(text, str) else ""


def _is_valid_id(value: Any) -> TypeGuard[RequestId]:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _error_from_wire(error: Any) -> RpcError:
    """The peer's error object as an `RpcError`, whatever shape it came in."""
    if not isinstance(error, dict):
        return RpcError(INTERNAL_ERROR, f"malformed error from peer: a {type(error).__name__}")
    code = error.get("code")
    message = error.get("message")
    return RpcError(
        code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
        message if isinstance(message, str) else "error without message",
        error.get("data"),
    )


__all__ = [
    "CANCEL_REQUEST",
    "METHOD_NOT_FOUND",
    "Endpoint",
    "Handler",
    "RequestId",
    "short_failure",
]
