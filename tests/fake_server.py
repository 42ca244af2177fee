"""What the fake API servers `fake_llm.py` and `fake_anthropic.py` share. Standard library only.

- the prompt directives (`[[tool ...]]`, `[[slow]]`, `[[deltas]]`, `[[status]]`, ...) and their
  parser, `parse_script`;
- `FakeServer`: a `ThreadingHTTPServer` in a background thread, as a context manager, that
  records every request as an exchange;
- `FakeHandler`: reading a JSON request, answering JSON, and streaming server-sent events in
  HTTP/1.1 chunks, noticing a client that hangs up mid-answer;
- `run_cli`: the command line of a fake, which prints its base URL and serves until killed.

Each fake keeps only its vendor's wire format: routes, validation, payloads and error bodies.
"""

from __future__ import annotations

import argparse
import json
import re
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

__all__ = [
    "DEFAULT_HOST",
    "DELTAS_TOOL",
    "TOOL_RESULT_CHARS",
    "TOOL_RESULT_PREFIX",
    "BaseExchange",
    "ClientGone",
    "FakeHandler",
    "FakeServer",
    "Script",
    "dumps",
    "numbered_deltas",
    "numbered_tool_deltas",
    "parse_script",
    "run_cli",
    "split_json",
    "tool_result_text",
]

DEFAULT_HOST = "127.0.0.1"
DELTAS_TOOL = "deltas_args"
"""The tool `[[deltas N tool]]` calls (no agent offers it: the call fails, the turn goes on)."""
TOOL_RESULT_CHARS = 200
TOOL_RESULT_PREFIX = "Tool result: "
# A slow stream waits on the socket, so a client hanging up is noticed at once; this bounds
# one wait, and the nap taken when the client sent bytes instead of hanging up.
_WAIT_SECONDS = 0.1
_NAP_SECONDS = 0.005

_DIRECTIVE = re.compile(r"\[\[(tool|slow|deltas|status|retry-after|drop|length)\b")
_SIMPLE = re.compile(
    r"\[\[(?:slow\s+(?P<slow>\d+(?:\.\d*)?|\.\d+)"
    r"|deltas\s+(?P<deltas>\d+)(?:\s+(?P<deltas_kind>text|thinking|tool))?"
    r"|status\s+(?P<status>\d{3})(?:\s+(?P<times>\d+))?"
    r"|retry-after\s+(?P<retry_after>\d+(?:\.\d*)?|\.\d+)"
    r"|(?P<drop>drop)(?:\s+(?P<drop_times>\d+))?"
    r"|(?P<length>length))\s*\]\]"
)
_TOOL_HEAD = re.compile(r"\[\[tool\s+(?P<name>[^\s\]]+)\s*")


# --- scripts ------------------------------------------------------------------------------


@dataclass
class Script:
    """What the directives in one prompt ask for."""

    text: str = ""
    """The prompt with its directives removed."""
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    slow: float = 0.0
    deltas: int | None = None
    deltas_kind: str = "text"
    """What `[[deltas N KIND]]` streams: text, thinking, or the arguments of one call of
    `DELTAS_TOOL` (`{"words": "w0 w1 ..."}`, one word per delta)."""
    status: int | None = None
    status_times: int | None = None
    """Fail only the first `status_times` sends of the conversation; None: always."""
    retry_after: str | None = None
    drop: bool = False
    drop_times: int | None = None
    """Drop only the first `drop_times` sends of the conversation; None: always."""
    length: bool = False


def parse_script(prompt: str) -> Script:
    """The directives in `prompt`; malformed ones stay in the text."""
    script = Script()
    kept: list[str] = []
    position = 0
    decoder = json.JSONDecoder()
    while True:
        found = _DIRECTIVE.search(prompt, position)
        if found is None:
            kept.append(prompt[position:])
            break
        start = found.start()
        kept.append(prompt[position:start])
        if found.group(1) == "tool":
            end = _parse_tool(prompt, start, decoder, script)
        else:
            end = _parse_simple(prompt, start, script)
        if end is None:  # not a directive after all: keep the text
            kept.append(prompt[start : start + 2])
            end = start + 2
        position = end
    script.text = " ".join("".join(kept).split())
    return script


def _parse_simple(prompt: str, start: int, script: Script) -> int | None:
    simple = _SIMPLE.match(prompt, start)
    if simple is None:
        return None
    if simple.group("slow") is not None:
        script.slow = float(simple.group("slow"))
    elif simple.group("deltas") is not None:
        script.deltas = int(simple.group("deltas"))
        script.deltas_kind = simple.group("deltas_kind") or "text"
    elif simple.group("status") is not None:
        script.status = int(simple.group("status"))
        if simple.group("times") is not None:
            script.status_times = int(simple.group("times"))
    elif simple.group("retry_after") is not None:
        script.retry_after = simple.group("retry_after")
    elif simple.group("drop"):
        script.drop = True
        if simple.group("drop_times") is not None:
            script.drop_times = int(simple.group("drop_times"))
    else:
        script.length = True
    return simple.end()


def _parse_tool(prompt: str, start: int, decoder: json.JSONDecoder, script: Script) -> int | None:
    head = _TOOL_HEAD.match(prompt, start)
    if head is None:
        return None
    position = head.end()
    arguments: dict[str, Any] = {}
    if prompt.startswith("{", position):
        try:
            value, position = decoder.raw_decode(prompt, position)
        except json.JSONDecodeError:
            return None
        if not isinstance(value, dict):
            return None
        arguments = value
    closing = re.compile(r"\s*\]\]").match(prompt, position)
    if closing is None:
        return None
    script.tools.append((head.group("name"), arguments))
    return closing.end()


# --- payload helpers ----------------------------------------------------------------------


def tool_result_text(results: Iterable[str]) -> str:
    """The reply to tool results: one "Tool result: <first 200 characters>" line each."""
    return "\n".join(TOOL_RESULT_PREFIX + result[:TOOL_RESULT_CHARS] for result in results)


def numbered_deltas(count: int) -> list[str]:
    """The deltas of `[[deltas N]]`: "w0 ", "w1 ", ..."""
    return [f"w{i} " for i in range(count)]


def numbered_tool_deltas(count: int) -> list[str]:
    """The argument deltas of `[[deltas N tool]]`: `{"words":"`, "w0 ", ..., `"}`."""
    return ['{"words":"', *numbered_deltas(count), '"}']


def split_json(arguments: str, parts: int) -> list[str]:
    """Tool-call JSON in about `parts` pieces, cut mid-token as real streams do."""
    size = max(1, -(-len(arguments) // parts))
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]


def dumps(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# --- recording ----------------------------------------------------------------------------


@dataclass
class BaseExchange:
    """One request and what became of it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lowercased."""
    body: Any
    started: float = field(default_factory=time.monotonic)
    received: float | None = None
    """`time.monotonic()` when the whole request body had arrived (POST only)."""
    first_byte: float | None = None
    """`time.monotonic()` when the answer's status line and headers were sent."""
    ended: float | None = None
    status: int | None = None
    outcome: str = "pending"
    """pending | completed | error | disconnected (the client went away mid-answer), or a
    fake's own outcome."""

    def _end(self, outcome: str) -> None:
        self.outcome = outcome
        self.ended = time.monotonic()


ExchangeT = TypeVar("ExchangeT", bound=BaseExchange)


class FakeServer(Generic[ExchangeT]):
    """A fake API server in a background thread; a context manager.

    A subclass names its `handler` and `exchange_class`, and says which paths are API
    requests (`_is_request`); `name` is its thread's name and the prefix of its log lines.
    """

    name = "fake-server"
    label = "fake"
    """As in "the fake {label} server is not running"."""
    base_path = ""
    """What `base_url` adds to `http://host:port`."""
    exchange_class: Callable[..., ExchangeT]
    on_finish: Callable[[ExchangeT], None] | None = None
    """Called (in the handler's thread) with each exchange once its answer ended."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 0, *, verbose: bool = False) -> None:
        self._address = (host, port)
        self.verbose = verbose
        self.exchanges: list[ExchangeT] = []
        self._changed = threading.Condition()
        self._server: FakeHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> Self:
        if self._server is None:
            self._server = FakeHTTPServer(self._address, self.handler, self)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=self.name,
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def handler(self) -> type[FakeHandler]:
        """The request handler class: the fake's routes and wire format."""
        raise NotImplementedError

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"the fake {self.label} server is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._address[0]}:{self.port}{self.base_path}"

    # what was seen

    @property
    def requests(self) -> list[Any]:
        """Bodies of the API requests, in arrival order."""
        with self._changed:
            return [e.body for e in self.exchanges if self._is_request(e.path)]

    def clear(self) -> None:
        with self._changed:
            self.exchanges.clear()

    def _is_request(self, path: str) -> bool:
        raise NotImplementedError

    # used by the handler

    def _record(self, exchange: ExchangeT) -> None:
        with self._changed:
            self.exchanges.append(exchange)
            self._changed.notify_all()

    def _finish(self, exchange: ExchangeT, outcome: str, status: int | None = None) -> None:
        with self._changed:
            if status is not None:
                exchange.status = status
            exchange._end(outcome)
            self._changed.notify_all()
        if self.on_finish is not None:
            self.on_finish(exchange)


class FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], handler: type[FakeHandler], fake: FakeServer[Any]
    ) -> None:
        self.fake = fake
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that vanished between requests is no error worth a traceback.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class ClientGone(Exception):
    """The client closed the connection while we were answering."""


# --- HTTP ---------------------------------------------------------------------------------


class FakeHandler(BaseHTTPRequestHandler):
    """Records each request, then lets the fake's `_answer` (POST) answer it."""

    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as the real APIs
    sys_version = ""
    timeout = 60  # an idle keep-alive connection is dropped after this
    server: FakeHTTPServer

    def setup(self) -> None:
        super().setup()
        # Each event goes out as it is written, as from a real API server (no Nagle delay).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        fake = self.server.fake
        if fake.verbose:
            sys.stderr.write(f"{fake.name}: {format % args}\n")

    # requests

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        received = time.monotonic()
        try:
            body: Any = json.loads(raw) if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = raw.decode("utf-8", "replace")
        self._serve(body, self._answer, received=received)

    def _answer(self, exchange: Any, body: Any) -> None:
        raise NotImplementedError

    def _serve(
        self, body: Any, answer: Callable[[Any, Any], None], *, received: float | None = None
    ) -> None:
        """Record the request, then `answer(exchange, body)`, noting a client that hangs up."""
        fake = self.server.fake
        exchange = fake.exchange_class(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            received=received,
        )
        self._exchange = exchange
        fake._record(exchange)
        try:
            answer(exchange, body)
        except ClientGone:
            self._gone(exchange)

    def _gone(self, exchange: Any) -> None:
        self.close_connection = True
        self.server.fake._finish(exchange, "disconnected")

    # writing

    def end_headers(self) -> None:
        super().end_headers()  # the status line and headers go out now
        exchange: BaseExchange | None = getattr(self, "_exchange", None)
        if exchange is not None and exchange.first_byte is None:
            exchange.first_byte = time.monotonic()

    def _common_headers(self) -> None:
        """The vendor's headers on every answer."""

    def _send_json(
        self,
        exchange: Any,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self._common_headers()
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._write(data)
        self.server.fake._finish(exchange, "completed" if status < 400 else "error", status)

    def _start_stream(self, exchange: Any) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self._common_headers()
        self.end_headers()
        exchange.status = 200

    def _write_events(self, events: Iterable[tuple[str | None, Any]], slow: float) -> None:
        """Each (event name or None, data) as one chunk, waiting `slow` seconds between."""
        for number, (name, data) in enumerate(events):
            if number and slow:
                self._pause(slow)
            self._write_event(data, name)

    def _write_event(self, data: Any, name: str | None = None) -> None:
        """`event: NAME` (when named) and `data: JSON` (bytes go as they are), as one chunk."""
        head = b"" if name is None else b"event: " + name.encode() + b"\n"
        payload = data if isinstance(data, bytes) else dumps(data)
        self._write_chunk(head + b"data: " + payload + b"\n\n")

    def _end_stream(self, exchange: Any) -> None:
        self._write(b"0\r\n\r\n")
        self.server.fake._finish(exchange, "completed")

    def _write_chunk(self, data: bytes) -> None:
        self._write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as exc:  # broken pipe, reset, aborted
            raise ClientGone() from exc

    def _pause(self, seconds: float) -> None:
        """Sleep, but notice at once when the client closes the connection meanwhile."""
        deadline = time.monotonic() + seconds
        connection: socket.socket = self.connection
        while (remaining := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([connection], [], [], min(remaining, _WAIT_SECONDS))
            if readable:
                try:
                    peeked = connection.recv(1, socket.MSG_PEEK)
                except (ConnectionError, OSError) as exc:
                    raise ClientGone() from exc
                if not peeked:
                    raise ClientGone()
                time.sleep(min(remaining, _NAP_SECONDS))  # bytes, not a hang-up


# --- CLI ----------------------------------------------------------------------------------


def run_cli(
    argv: list[str] | None,
    description: str,
    make_fake: Callable[[argparse.Namespace], FakeServer[Any]],
    add_options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Parse --host, --port (0: a free one), the fake's own options, --verbose and --timings;
    print the base URL as the first stdout line and serve until SIGTERM or SIGINT.

    With --timings, each finished exchange adds one JSON line to stdout: its method, path,
    outcome and `time.monotonic()` stamps (received, first_byte, ended), which a benchmark
    on the same machine compares with its own clock."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    if add_options is not None:
        add_options(parser)
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    parser.add_argument(
        "--timings", action="store_true", help="print a JSON line of timings per exchange"
    )
    args = parser.parse_args(argv)

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with make_fake(args) as fake:
        if args.timings:
            fake.on_finish = _print_timings
        print(fake.base_url, flush=True)
        while not stop.wait(0.5):
            pass
    return 0


_PRINT_LOCK = threading.Lock()


def _print_timings(exchange: BaseExchange) -> None:
    line = json.dumps(
        {
            "method": exchange.method,
            "path": exchange.path,
            "outcome": exchange.outcome,
            "status": exchange.status,
            "received": exchange.received,
            "first_byte": exchange.first_byte,
            "ended": exchange.ended,
        }
    )
    with _PRINT_LOCK:
        print(line, flush=True)
