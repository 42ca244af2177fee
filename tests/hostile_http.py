"""An HTTP server on 127.0.0.1 that answers every request with raw bytes of the test's
choosing: a body far larger than promised, one that never ends, one dribbled a byte at a
time, a redirect. Standard library only.

Each connection reads the request head, then runs the test's `Answer` with a `Wire`,
which counts what was written and notices the client hanging up (a write fails).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import suppress
from types import TracebackType
from typing import Self

Answer = Callable[["Wire"], None]


class ClientGone(Exception):
    """The client closed the connection while we were writing."""


class Wire:
    def __init__(self, conn: socket.socket, server: HostileServer) -> None:
        self._conn = conn
        self._server = server

    @property
    def stopping(self) -> bool:
        return self._server.stopping.is_set()

    def head(self, status: str = "200 OK", **headers: str | int) -> None:
        lines = [f"HTTP/1.1 {status}"]
        lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode())

    def send(self, data: bytes) -> None:
        try:
            self._conn.sendall(data)
        except OSError:
            self._server.hung_up.set()
            raise ClientGone from None
        self._server.sent += len(data)

    def chunk(self, data: bytes) -> None:
        self.send(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def pause(self, seconds: float) -> None:
        """Wait, but end at once when the server closes (a test that is done with us)."""
        if self._server.stopping.wait(seconds):
            raise ClientGone


class HostileServer:
    def __init__(self, answer: Answer) -> None:
        self._answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._threads: list[threading.Thread] = []
        self.stopping = threading.Event()
        self.hung_up = threading.Event()
        """Set when a write failed: the client gave up on the answer."""
        self.sent = 0
        """Bytes written, heads included."""
        self.heads: list[str] = []
        """The request heads received."""

    @property
    def base_url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> Self:
        accepting = threading.Thread(target=self._accept, daemon=True)
        accepting.start()
        self._threads.append(accepting)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stopping.set()
        with suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close does not)
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            serving = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            serving.start()
            self._threads.append(serving)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            self.heads.append(head.decode(errors="replace"))
            with suppress(ClientGone):
                self._answer(Wire(conn, self))


def json_list(count: int, item: Callable[[int], bytes]) -> Iterator[bytes]:
    """`{"data": [item(0), item(1), ...]}` in pieces, for a body streamed as it is made."""
    yield b'{"object": "list", "data": ['
    for index in range(count):
        yield (b"," if index else b"") + item(index)
    yield b"]}"
