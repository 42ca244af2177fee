"""Hostile frames, thousands of them, against the real `Endpoint` over memory streams.

Whatever a line holds, the endpoint answers it as JSON-RPC says (or, for a notification or
a response, not at all) and goes on serving: after each frame a valid request still gets
its answer. The oracle (`answer_for`) is the rule book written from the spec, not from the
endpoint's code; the frames come from Hypothesis, derandomized so CI sees the same ones.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_agent.rpc.endpoint import Endpoint, Work
from acp_agent.rpc.errors import RpcError

pytestmark = pytest.mark.anyio

Serving = Callable[..., AbstractAsyncContextManager[tuple[Endpoint, Any]]]
Wire = Any  # conftest's `Wire`: the peer's end of the memory streams

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # `serving` only hands out a function
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

SENT: Counter[str] = Counter()
"""Hostile frames sent, by strategy (printed at the end of the module, with `-s`)."""


@pytest.fixture(scope="module", autouse=True)
def _frame_count() -> Iterator[None]:
    yield
    print(f"\nfuzz: {SENT.total()} hostile frames: {dict(SENT)}", file=sys.stderr)


def examples(count: int) -> settings:
    return settings(FUZZ, max_examples=count)


# --- the handler and the rule book -------------------------------------------------------

DEPTH_NO_WRITER_CAN_TAKE = 20_000


class FuzzHandler:
    """`echo` answers its params; the other methods fail each way a handler can."""

    def receive_request(self, method: str, params: Any) -> Work:
        if method == "refuse_to_start":
            raise RuntimeError("cannot take this request")
        return partial(self._answer, method, params)

    async def _answer(self, method: str, params: Any) -> Any:
        match method:
            case "echo":
                return params
            case "fail":
                raise ValueError("the handler failed")
            case "invalid":
                raise RpcError(-32602, "invalid params", {"params": params})
            case "not_json":
                return {"value": object()}
            case "too_deep":
                deep: list[Any] = []
                for _ in range(DEPTH_NO_WRITER_CAN_TAKE):
                    deep = [deep]
                return deep
            case _:
                raise RpcError(-32601, f"method not found: {method}")

    async def handle_notification(self, method: str, params: Any) -> None:
        if method == "fail":
            raise RuntimeError("the notification handler failed")


HANDLER_ERRORS = {
    "fail": -32603,
    "invalid": -32602,
    "not_json": -32603,
    "too_deep": -32603,
    "refuse_to_start": -32603,
}

Outcome = str | None
"""One reply, canonically (`outcome_of`), or None for no reply at all."""


def error(request_id: Any, code: int) -> str:
    return json.dumps(["error", request_id, code])


def result(request_id: Any, value: Any) -> str:
    return json.dumps(["result", request_id, value], sort_keys=True)


PARSE_ERROR = error(None, -32700)
INVALID_REQUEST = error(None, -32600)


DEEP = 1_000


def deep_result(request_id: Any) -> str:
    return "deep " + json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1].replace(" ", "")


def nesting(value: Any) -> int:
    """How deep a JSON value nests, counted without recursion."""
    depth, level = 0, [value]
    while level:
        depth += 1
        level = [
            child
            for item in level
            if isinstance(item, (list, dict))
            for child in (item.values() if isinstance(item, dict) else item)
        ]
    return depth


def outcome_from_wire(raw: bytes) -> str:
    """A reply's outcome. A result nested `DEEP` levels or more is known by its head only
    (`deep_result`): at its own stack depth the test may fail to read it back."""
    try:
        reply = json.loads(raw)
    except RecursionError:
        return "deep " + raw.partition(b',"result":')[0].decode()
    if "result" in reply and nesting(reply["result"]) >= DEEP:
        return "deep " + raw.partition(b',"result":')[0].decode()
    return outcome_of(reply)


def outcome_of(reply: dict[str, Any]) -> str:
    assert reply["jsonrpc"] == "2.0"
    if "error" in reply:
        assert "result" not in reply
        assert isinstance(reply["error"]["message"], str)
        return error(reply["id"], reply["error"]["code"])
    return result(reply["id"], reply["result"])


def is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def as_read(value: Any) -> Any:
    """`value` as the endpoint reads it: a surrogate left alone by JSON (a pair is one
    character) is U+FFFD, as UTF-16 decoding with replacement makes it."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [as_read(item) for item in value]
    if isinstance(value, dict):
        return {as_read(key): as_read(item) for key, item in value.items()}
    return value


def answer_for(message: Any) -> Outcome:
    """What JSON-RPC 2.0 says a peer must answer to this message (batches unsupported)."""
    if not isinstance(message, dict):  # a batch, empty or not, or a bare value
        return INVALID_REQUEST
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a response: never answered
    request_id = message.get("id")
    method = message.get("method")
    if "id" in message and not is_id(request_id):
        return INVALID_REQUEST
    if not isinstance(method, str):
        return error(request_id, -32600)
    if "id" not in message:
        return None  # a notification
    if method == "echo":
        return result(request_id, as_read(message.get("params")))
    return error(request_id, HANDLER_ERRORS.get(method, -32601))


def refuse(name: str) -> Any:
    raise ValueError(name)


def finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(text)
    return value


def answer_for_line(line: bytes) -> Outcome:
    """The answer to a raw line: strict UTF-8, strict JSON (no NaN, nothing past a float)."""
    line = line.strip()
    if not line:
        return None
    try:
        message = json.loads(line.decode(), parse_constant=refuse, parse_float=finite)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return PARSE_ERROR
    return answer_for(message)


# --- driving the endpoint ------------------------------------------------------------------

_sentinel_ids = itertools.count()


def sentinel() -> tuple[bytes, str]:
    """A valid request, and the canonical answer it must get."""
    request_id = f"sentinel-{next(_sentinel_ids)}"
    frame = {"jsonrpc": "2.0", "id": request_id, "method": "echo", "params": ["ok"]}
    return json.dumps(frame).encode() + b"\n", result(request_id, ["ok"])


async def exchange(
    wire: Wire, frame: bytes, acceptable: set[Outcome], kind: str | None = None
) -> None:
    """Send one frame with a valid request right behind it: the frame must get exactly one
    of the acceptable outcomes (None: no reply at all), the valid request its answer.

    Ordered by awaiting answers, never by sleeping: the endpoint reads the frame first, so
    by the valid request's answer any error for the frame is written; a request's own
    answer comes from its task, so when the frame must get one, that is awaited too."""
    assert b"\n" not in frame
    next_request, its_answer = sentinel()
    if kind is not None:
        SENT[kind] += 1
    await wire.send_bytes(frame + b"\n" + next_request)
    replies: list[str] = []
    answered = False
    while not (answered and (replies or None in acceptable)):
        reply = outcome_from_wire(await wire.receive_raw())
        if reply == its_answer:
            answered = True
        else:
            replies.append(reply)
    assert len(replies) <= 1, f"{len(replies)} replies to one frame: {replies}"
    outcome = replies[0] if replies else None
    assert outcome in acceptable, f"{frame[:200]!r} got {str(outcome)[:300]}"


async def exchange_all(
    serving: Serving, frames: list[tuple[bytes, set[Outcome]]], kind: str
) -> None:
    async with serving(FuzzHandler()) as (_, wire):
        for frame, acceptable in frames:
            await exchange(wire, frame, acceptable, kind)
        await exchange(wire, b"", {None})  # nothing more arrived late


# --- strategies ------------------------------------------------------------------------------

ODD_CHARACTERS = ["\ud800", "\udfff", "\ud83d", "\x00", "\u2028", "é", "😀", '"', "\\", "\n"]
texts = st.text(st.characters(exclude_categories=()) | st.sampled_from(ODD_CHARACTERS), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=8,
)
METHODS = ["echo", *HANDLER_ERRORS, "$/cancel_request", "session/prompt", ""]
methods = st.sampled_from(METHODS) | texts
ids = st.integers() | texts
error_objects = st.fixed_dictionaries(
    {"code": st.integers(), "message": texts}, optional={"data": json_values}
)


def right_or_wrong(right: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return right | json_values


envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": right_or_wrong(st.just("2.0")),
        "id": right_or_wrong(ids),
        "method": right_or_wrong(methods),
        "params": json_values,
        "result": json_values,
        "error": right_or_wrong(error_objects),
    },
)
requests = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "id": ids, "method": methods},
    optional={"params": json_values},
)
notifications = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": methods}, optional={"params": json_values}
)
responses = st.fixed_dictionaries(
    {"id": st.none() | right_or_wrong(ids)},
    optional={"jsonrpc": right_or_wrong(st.just("2.0"))},
).flatmap(
    lambda envelope: st.sampled_from([{"result"}, {"error"}, {"result", "error"}]).flatmap(
        lambda keys: st.fixed_dictionaries(
            {
                **{key: st.just(value) for key, value in envelope.items()},
                **{key: right_or_wrong(error_objects) for key in keys if key == "error"},
                **{key: json_values for key in keys if key == "result"},
            }
        )
    )
)
messages = envelopes | requests | notifications | responses


def as_line(message: Any, ascii_only: bool) -> bytes:
    """A message as one line: escaped ASCII, or raw UTF-8 when it has no lone surrogate."""
    try:
        return json.dumps(message, ensure_ascii=ascii_only).encode()
    except UnicodeEncodeError:
        return json.dumps(message).encode()


@st.composite
def encoded(draw: st.DrawFn, message_strategy: st.SearchStrategy[Any] = messages) -> bytes:
    return as_line(draw(message_strategy), draw(st.booleans()))


def one_line(data: bytes) -> bytes:
    return data.replace(b"\n", b" ")


# --- the fuzz ----------------------------------------------------------------------------------


@examples(300)
@given(st.lists(st.tuples(messages, st.booleans()), min_size=1, max_size=12))
async def test_every_envelope_field_of_every_type_gets_the_answer_json_rpc_prescribes(
    serving: Serving, drawn: list[tuple[Any, bool]]
) -> None:
    frames = [
        (as_line(message, ascii_only), {answer_for(message)}) for message, ascii_only in drawn
    ]
    await exchange_all(serving, frames, "envelopes")


@examples(150)
@given(st.lists(st.binary(min_size=1, max_size=64).map(one_line), min_size=1, max_size=20))
async def test_random_bytes_get_a_parse_error_or_whatever_they_happen_to_say(
    serving: Serving, lines: list[bytes]
) -> None:
    await exchange_all(serving, [(line, {answer_for_line(line)}) for line in lines], "bytes")


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid message with a few bytes replaced, inserted or deleted."""
    data = bytearray(draw(encoded()))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        match draw(st.sampled_from(["replace", "insert", "delete"])):
            case "replace" if at < len(data):
                data[at] = draw(st.integers(0, 255))
            case "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=3))
            case _:
                del data[at : at + 1]
    return one_line(bytes(data))


@examples(200)
@given(st.lists(mutated(), min_size=1, max_size=20))
async def test_mutated_messages_get_a_parse_error_or_whatever_they_happen_to_say(
    serving: Serving, lines: list[bytes]
) -> None:
    await exchange_all(serving, [(line, {answer_for_line(line)}) for line in lines], "mutated")


INVALID_UTF8 = [b"\xff", b"\xfe", b"\x80", b"\xc0\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88"]


@st.composite
def invalid_utf8(draw: st.DrawFn) -> bytes:
    data = draw(encoded())
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.sampled_from(INVALID_UTF8)) + data[at:]


@examples(100)
@given(st.lists(invalid_utf8(), min_size=1, max_size=20))
async def test_invalid_utf8_anywhere_is_a_parse_error(serving: Serving, lines: list[bytes]) -> None:
    await exchange_all(serving, [(line, {PARSE_ERROR}) for line in lines], "invalid utf-8")


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    data = draw(encoded(envelopes | requests | notifications | responses | st.lists(messages)))
    return data[: draw(st.integers(1, len(data) - 1))]


@examples(100)
@given(st.lists(truncated(), min_size=1, max_size=20))
async def test_truncated_json_is_a_parse_error(serving: Serving, lines: list[bytes]) -> None:
    await exchange_all(serving, [(line, {PARSE_ERROR}) for line in lines], "truncated")


@examples(60)
@given(st.lists(st.lists(messages | json_values, max_size=5), min_size=1, max_size=12))
async def test_a_batch_gets_one_invalid_request_and_none_of_its_requests_run(
    serving: Serving, batches: list[list[Any]]
) -> None:
    frames = [(json.dumps(batch).encode(), {INVALID_REQUEST}) for batch in batches]
    await exchange_all(serving, frames, "batches")


@examples(60)
@given(st.lists(responses, min_size=1, max_size=20))
async def test_a_response_to_nothing_is_never_answered(
    serving: Serving, drawn: list[dict[str, Any]]
) -> None:
    await exchange_all(serving, [(json.dumps(r).encode(), {None}) for r in drawn], "responses")


@st.composite
def deeply_nested(draw: st.DrawFn) -> tuple[bytes, set[Outcome]]:
    """1,000 to 100,000 levels. Whether a depth can be read depends on the recursion limit
    (pytest and Hypothesis raise it), so a frame the parser may read is allowed its due
    answer too; a request's echo then may also be too deep to write (-32603)."""
    depth = draw(st.integers(1_000, 100_000))
    opening, closing = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b'[{"b":', b"}]")]))
    inner = opening * depth + b"1" + closing * depth
    request_id = draw(ids.filter(lambda value: "\\" not in json.dumps(value)))
    envelope = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
    shapes = ["bare", "unclosed", "params", "failing", "notification", "response"]
    shape = draw(st.sampled_from(shapes))
    match shape:
        case "bare":  # a batch, an object without method, or too deep to read
            return inner, {PARSE_ERROR, INVALID_REQUEST}
        case "unclosed":
            return opening * depth, {PARSE_ERROR}
        case "params":  # if read, its echo may be too deep to write
            frame = envelope + b',"method":"echo","params":' + inner + b"}"
            return frame, {PARSE_ERROR, error(request_id, -32603), deep_result(request_id)}
        case "failing":
            frame = envelope + b',"method":"fail","params":' + inner + b"}"
            return frame, {PARSE_ERROR, error(request_id, -32603)}
        case "notification":
            frame = b'{"jsonrpc":"2.0","method":"echo","params":' + inner + b"}"
            return frame, {PARSE_ERROR, None}
        case _:
            return envelope + b',"result":' + inner + b"}", {PARSE_ERROR, None}


@examples(60)
@given(st.lists(deeply_nested(), min_size=1, max_size=6))
async def test_nesting_too_deep_to_read_is_a_parse_error_and_never_fatal(
    serving: Serving, frames: list[tuple[bytes, set[Outcome]]]
) -> None:
    await exchange_all(serving, frames, "deep")


@st.composite
def huge_numbers(draw: st.DrawFn) -> tuple[bytes, set[Outcome]]:
    """Integers past Python's 4,300-digit limit and floats past the double range cannot be
    read (parse error); long integers within it round-trip."""
    digits = draw(st.integers(1, 20_000))
    number = draw(st.sampled_from(["", "-"])) + "9" * digits
    if draw(st.booleans()):
        number = draw(st.sampled_from(["1e", "-1E", "2.5e+"])) + str(309 + digits)
        readable = False
    else:
        readable = digits <= sys.get_int_max_str_digits()
    where = draw(st.sampled_from(["id", "params"]))
    if where == "id":
        frame = '{"jsonrpc":"2.0","id":' + number + ',"method":"echo","params":1}'
    else:
        frame = '{"jsonrpc":"2.0","id":1,"method":"echo","params":[' + number + "]}"
    return frame.encode(), {answer_for_line(frame.encode()) if readable else PARSE_ERROR}


@examples(60)
@given(st.lists(huge_numbers(), min_size=1, max_size=10))
async def test_numbers_too_big_to_read_are_a_parse_error(
    serving: Serving, frames: list[tuple[bytes, set[Outcome]]]
) -> None:
    await exchange_all(serving, frames, "numbers")


@st.composite
def huge_strings(draw: st.DrawFn) -> Any:
    """A message with one string of 64 KiB to 4 MiB, in any field."""
    size = draw(st.integers(1 << 16, 4 << 20))
    text = draw(st.sampled_from(["x", "é", "\ud800", '"', "\\", "😀"])) * size
    field = draw(st.sampled_from(["id", "method", "params", "result", "error"]))
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "echo"}
    match field:
        case "result" | "error":
            del message["method"]
            message[field] = text if field == "result" else {"code": 1, "message": text}
        case _:
            message[field] = text
    return message


@examples(25)
@given(st.lists(huge_strings(), min_size=1, max_size=3))
async def test_huge_strings_anywhere_get_their_due_answer(
    serving: Serving, drawn: list[Any]
) -> None:
    frames = [(json.dumps(message).encode(), {answer_for(message)}) for message in drawn]
    await exchange_all(serving, frames, "huge strings")


# --- interleavings -------------------------------------------------------------------------------


@st.composite
def interleaving(draw: st.DrawFn) -> list[tuple[bytes, Outcome]]:
    """Hostile frames of every kind with valid requests between them, each request id
    used once (a reused id in flight is its own error, whose timing would decide)."""
    kinds = st.sampled_from(["message", "request", "bytes", "utf8", "truncated", "batch"])
    frames: list[tuple[bytes, Outcome]] = []
    for index in range(draw(st.integers(1, 16))):
        match draw(kinds):
            case "message" | "request":
                message = draw(messages if draw(st.booleans()) else requests)
                if isinstance(answer_for(message), str) and is_id(message.get("id")):
                    message["id"] = f"r{index}" if isinstance(message["id"], str) else index
                if "method" not in message and is_id(message.get("id")):
                    message["id"] = f"reply {message['id']}"  # never our outbound id
                line = json.dumps(message).encode()
                frames.append((line, answer_for(message)))
            case "bytes":
                line = one_line(draw(st.binary(min_size=1, max_size=32)))
                outcome = answer_for_line(line)
                if outcome in (None, PARSE_ERROR, INVALID_REQUEST):  # else a request by chance
                    frames.append((line, outcome))
            case "utf8":
                frames.append((draw(invalid_utf8()), PARSE_ERROR))
            case "truncated":
                frames.append((draw(truncated()), PARSE_ERROR))
            case _:
                frames.append(
                    (json.dumps(draw(st.lists(messages, max_size=3))).encode(), INVALID_REQUEST)
                )
    return frames


@examples(200)
@given(interleaving(), st.lists(st.integers(1, 1 << 16), max_size=8))
async def test_interleaved_frames_split_anywhere_each_get_their_answer_while_we_await_one(
    serving: Serving, frames: list[tuple[bytes, Outcome]], cuts: list[int]
) -> None:
    async with serving(FuzzHandler()) as (endpoint, wire), anyio.create_task_group() as tg:
        asked: list[Any] = []

        async def ask() -> None:
            asked.append(await endpoint.request("client/ask", {"q": 1}))

        tg.start_soon(ask)
        outbound = await wire.receive()
        next_request, its_answer = sentinel()
        data = b"".join(frame + b"\n" for frame, _ in frames) + next_request
        for chunk in _split(data, cuts):
            await wire.send_bytes(chunk)
        SENT["interleaved"] += len(frames)
        expected = Counter(outcome for _, outcome in frames if outcome is not None)
        expected[its_answer] += 1
        received = [outcome_from_wire(await wire.receive_raw()) for _ in range(expected.total())]
        assert Counter(received) == expected
        await exchange(wire, b"", {None})  # nothing more arrived late
        await wire.send({"jsonrpc": "2.0", "id": outbound["id"], "result": "answered"})
    assert asked == ["answered"]


def _split(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    """The bytes as a pipe might deliver them: cut at arbitrary points, mid-frame too."""
    start = 0
    for cut in sorted({cut % len(data) for cut in cuts} - {0}):
        yield data[start:cut]  # never empty: an empty read is the end of input
        start = cut
    yield data[start:]
