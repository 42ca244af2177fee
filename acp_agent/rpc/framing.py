"""Newline-delimited frames over any byte stream: pipe, regular file, socket or tty.

File descriptors are read and written with plain blocking calls in worker threads, which
work the same for every kind of stream (event-loop readers refuse regular files), and never
switch the descriptor to non-blocking mode, which would leak into the parent's shell.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Protocol

import anyio
import anyio.to_thread

READ_CHUNK = 1 << 20
MAX_FRAME_BYTES = 256 << 20


class ByteSource(Protocol):
    async def read(self) -> bytes:
        """Next chunk of bytes; b"" at end of input."""
        ...


class ByteSink(Protocol):
    async def write(self, data: bytes) -> None: ...


class FdSource:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def read(self) -> bytes:
        return await anyio.to_thread.run_sync(os.read, self._fd, READ_CHUNK, abandon_on_cancel=True)


class FdSink:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, data: bytes) -> None:
        await anyio.to_thread.run_sync(self._write_all, data)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]


class StreamSource:
    """Adapts an anyio byte stream (memory pair in tests, sockets) to `ByteSource`."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream = stream

    async def read(self) -> bytes:
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
