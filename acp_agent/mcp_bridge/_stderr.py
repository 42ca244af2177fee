"""A stdio server's stderr: to our log, line by line, never to our stdout; the last lines
kept for failure reports.

The server writes into a pipe we create (the SDK takes a file for the child's stderr); we
read the other end without threads, and the read ends when every writer has closed it (the
server and any children it started) or when the connection's teardown stops it.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from typing import TextIO

import anyio

log = logging.getLogger("acp_agent.mcp_bridge.stderr")

STDERR_LINES = 20
"""Lines kept for a failure report."""
_MAX_LINE = 4000


class StderrPipe:
    def __init__(self, server: str, tail: deque[str]) -> None:
        self.server = server
        self.tail = tail
        """Shared with the server's record, so a report made later still sees new lines."""
        self.done = anyio.Event()
        """Set when the pipe reached its end (every writer closed it)."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self._read_fd = read_fd
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8")
        """Handed to the child as its stderr; close it once the child has started."""

    def close_writer(self) -> None:
        self.writer.close()

    def discard(self) -> None:
        """Close both ends, for a pipe no pump will read (its server never connected)."""
        self.close_writer()
        os.close(self._read_fd)
        self.done.set()

    async def pump(self) -> None:
        """Log each line until the pipe ends (or this task is cancelled: no line comes after
        that either, so `done` is set then too and nobody waits for it in vain)."""
        pending = b""
        try:
            while True:
                await anyio.wait_readable(self._read_fd)
                try:
                    chunk = os.read(self._read_fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._line(line)
                if len(pending) > _MAX_LINE:
                    self._line(pending)
                    pending = b""
            if pending:
                self._line(pending)
        finally:
            self.done.set()
            self.close_writer()
            os.close(self._read_fd)

    def _line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")[:_MAX_LINE]
        self.tail.append(line)
        log.info("[%s] %s", self.server, line)
