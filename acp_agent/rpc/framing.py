"""Newline-delimited frames over any byte stream: pipe, regular file, socket or tty.

File descriptors are read and written with plain blocking calls in worker threads, which
work the same for every kind of stream (event-loop readers refuse regular files), and never
switch the descriptor to non-blocking mode, which would leak into the parent's shell.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from .errors import INVALID_REQUEST, PARSE_ERROR, RpcError

if TYPE_CHECKING:
    import anyio.abc

# anyio is imported where it is used: the first frame is read before the event loop exists
# (`read_first_line`), and its answer must not wait for anyio's import.

READ_CHUNK = 1 << 20
MAX_FRAME_BYTES = 256 << 20


class ByteSource(Protocol):
    async def read(self) -> bytes:
        """Next chunk of bytes; b"" at end of input."""
        ...


class ByteSink(Protocol):
    async def write(self, data: bytes) -> None: ...


class FdSource:
    def __init__(self, fd: int, *, unread: bytes = b"", ended: bool = False) -> None:
        self._fd = fd
        self._unread = unread
        """Bytes already read from `fd` (by `read_first_line`), returned first."""
        self._ended = ended
        """That read met the end of input: a terminal's Ctrl-D is not seen twice."""

    async def read(self) -> bytes:
        if self._unread:
            chunk, self._unread = self._unread, b""
            return chunk
        if self._ended:
            return b""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(os.read, self._fd, READ_CHUNK, abandon_on_cancel=True)


class FdSink:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, data: bytes) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(write_all, self._fd, data)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_first_line(fd: int, limit: int = READ_CHUNK) -> tuple[bytes | None, bytes, bool]:
    """Block until `fd` gives a whole first line. Returns that line without its newline
    (None at the end of input or past `limit` bytes), the bytes read past it (all of them
    when there is no line), and whether the input ended."""
    read = b""
    while (newline := read.find(b"\n")) == -1:
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            return None, read, True
        read += chunk
        if len(read) > limit:
            return None, read, False
    return read[:newline], read[newline + 1 :], False


class StreamSource:
    """Adapts an anyio byte stream (memory pair in tests, sockets) to `ByteSource`."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream = stream

    async def read(self) -> bytes:
        import anyio

        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return b""


class StreamSink:
    def __init__(self, stream: anyio.abc.ByteSendStream) -> None:
        self._stream = stream

    async def write(self, data: bytes) -> None:
        await self._stream.send(data)


async def read_lines(source: ByteSource, max_bytes: int = MAX_FRAME_BYTES) -> AsyncIterator[bytes]:
    """Yield each non-blank line without its terminator; a final unterminated line counts.

    A line longer than `max_bytes` is dropped up to its newline and stands as one empty
    frame, so the caller can answer it as invalid while the stream stays usable.
    """
    pending = bytearray()
    oversized = False
    while True:
        chunk = await source.read()
        if not chunk:
            break
        start = 0
        while (newline := chunk.find(b"\n", start)) != -1:
            if oversized:
                oversized = False
            elif len(pending) + newline - start > max_bytes:
                yield b""  # the line ends in this chunk, but it is still too long
            else:
                pending += chunk[start:newline]
                line = bytes(pending).strip()
                if line:
                    yield line
            pending.clear()
            start = newline + 1
        if not oversized:
            pending += chunk[start:]
            if len(pending) > max_bytes:
                oversized = True
                pending.clear()
                yield b""  # an empty frame: the caller answers it as an invalid request
    line = bytes(pending).strip()
    if line and not oversized:
        yield line


# --- one frame <-> one JSON value ------------------------------------------------------


class _NotJson(ValueError):
    """Raised from the parser's hooks: text Python would read, but JSON does not allow."""


def decode_frame(line: bytes) -> Any:
    """The JSON value one line carries; raises `RpcError` with the answer for a line that
    carries none.

    Strict UTF-8 and strict JSON: `NaN` and `Infinity` are not JSON, and a number that only
    fits a float as infinity (`1e999`) is refused too, so nothing we echo turns invalid.
    A lone surrogate escape (`"\\ud800"`: JSON allows it, UTF-8 cannot encode it, so it
    would fail wherever the text is written down) becomes U+FFFD, except in the message's
    `id`, which its answer echoes; an escaped pair is the one character it stands for.
    Nesting past the recursion limit and integers past the digit limit cannot be read at
    all; like any unreadable line they are parse errors, never an escaping exception.
    """
    if not line:  # what `read_lines` yields for a line over the size limit
        raise RpcError(INVALID_REQUEST, "message too large")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise RpcError(PARSE_ERROR, "parse error: the message is not UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
        return (
            _without_lone_surrogates(value, top=True) if _SURROGATE_ESCAPE.search(text) else value
        )
    except json.JSONDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from None
    except _NotJson as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from None
    except RecursionError:
        raise RpcError(PARSE_ERROR, "parse error: nested too deeply") from None
    except ValueError:  # int() past sys.get_int_max_str_digits()
        raise RpcError(PARSE_ERROR, "parse error: a number with too many digits") from None


def encode_frame(message: Any) -> bytes:
    """One line of strict JSON (no `NaN`), UTF-8, newline-terminated.

    Raises `TypeError`, `ValueError` or `RecursionError` for what JSON cannot carry.
    A lone surrogate (a peer may send one as an escape, and we may echo it) cannot be
    encoded as UTF-8, so such a frame is written with every non-ASCII character escaped.
    """
    try:
        return _dump(message, ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:
        return _dump(message, ensure_ascii=True).encode() + b"\n"


NOT_JSON = (TypeError, ValueError, RecursionError)
"""What `encode_frame` raises for a value JSON cannot carry."""


def _dump(message: Any, *, ensure_ascii: bool) -> str:
    return json.dumps(message, ensure_ascii=ensure_ascii, allow_nan=False, separators=(",", ":"))


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""How a surrogate gets into a frame: strict UTF-8 refuses raw ones, so only as an escape."""
_SURROGATE = re.compile("[\ud800-\udfff]")
"""Left in decoded text, a surrogate is lone: `json` joins an escaped pair into one."""


def _without_lone_surrogates(value: Any, *, top: bool = False) -> Any:
    """`value` with U+FFFD for each lone surrogate in its strings, keys included; but a
    message's own `id` stays as sent, or its answer would not find its way back."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {
            _SURROGATE.sub("\ufffd", k): v if top and k == "id" else _without_lone_surrogates(v)
            for k, v in value.items()
        }
    return value


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotJson(f"the number {text[:40]} is out of range")
    return value
