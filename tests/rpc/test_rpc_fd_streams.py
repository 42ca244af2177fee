"""`FdSource` / `FdSink` on real file descriptors: a pipe, a regular file and a socket."""

from __future__ import annotations

import json
import os
import socket
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from acp_agent.rpc.endpoint import Endpoint
from acp_agent.rpc.framing import FdSink, FdSource

pytestmark = pytest.mark.anyio


class Echo:
    def receive_request(self, method: str, params: Any) -> Any:
        return partial(self.handle_request, method, params)

    async def handle_request(self, method: str, params: Any) -> Any:
        return {"method": method, "params": params}

    async def handle_notification(self, method: str, params: Any) -> None:
        return None


def requests_bytes(count: int, payload: str = "") -> bytes:
    return b"".join(
        json.dumps(
            {"jsonrpc": "2.0", "id": n, "method": "echo", "params": f"{n}{payload}"}
        ).encode()
        + b"\n"
        for n in range(count)
    )


def assert_answers(output: bytes, count: int, payload: str = "") -> None:
    replies = [json.loads(line) for line in output.splitlines()]
    assert sorted(reply["id"] for reply in replies) == list(range(count))
    for reply in replies:
        assert reply["result"] == {"method": "echo", "params": f"{reply['id']}{payload}"}


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def write_all_and_close(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


async def test_fd_streams_serve_over_pipes_with_messages_larger_than_the_pipe_buffer() -> None:
    payload = "p" * (3 << 20)  # larger than both the pipe buffer and one read
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    output = b""
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    anyio.to_thread.run_sync,
                    write_all_and_close,
                    in_write,
                    requests_bytes(3, payload),
                )

                async def collect() -> None:
                    nonlocal output
                    output = await anyio.to_thread.run_sync(read_all, out_read)

                tg.start_soon(collect)
                await Endpoint(FdSource(in_read), FdSink(out_write)).serve(Echo())
                os.close(out_write)
    finally:
        os.close(in_read)
        os.close(out_read)
    assert_answers(output, 3, payload)


async def test_fd_streams_serve_a_regular_file_as_input_and_output(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(requests_bytes(50) + b'{"jsonrpc":"2.0","id":"last","method":"echo"}')
    responses = tmp_path / "responses.jsonl"
    in_fd = os.open(requests, os.O_RDONLY)
    out_fd = os.open(responses, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        with anyio.fail_after(10):
            await Endpoint(FdSource(in_fd), FdSink(out_fd)).serve(Echo())
    finally:
        os.close(in_fd)
        os.close(out_fd)
    lines = responses.read_bytes().splitlines()
    last = [json.loads(line) for line in lines if b'"last"' in line]
    assert last == [{"jsonrpc": "2.0", "id": "last", "result": {"method": "echo", "params": None}}]
    assert_answers(b"\n".join(line for line in lines if b'"last"' not in line), 50)


async def test_fd_streams_serve_both_directions_of_one_socket() -> None:
    ours, theirs = socket.socketpair()
    output = b""
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                def peer() -> None:
                    nonlocal output
                    theirs.sendall(requests_bytes(20))
                    theirs.shutdown(socket.SHUT_WR)  # our end reads end of input
                    chunks = []
                    while chunk := theirs.recv(1 << 16):
                        chunks.append(chunk)
                    output = b"".join(chunks)

                tg.start_soon(anyio.to_thread.run_sync, peer)
                fd = ours.fileno()
                await Endpoint(FdSource(fd), FdSink(fd)).serve(Echo())
                ours.shutdown(socket.SHUT_WR)  # the peer reads end of input
    finally:
        ours.close()
        theirs.close()
    assert_answers(output, 20)


async def test_fd_source_reads_end_of_input_from_an_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    fd = os.open(empty, os.O_RDONLY)
    try:
        assert await FdSource(fd).read() == b""
    finally:
        os.close(fd)


async def test_fd_sink_leaves_the_descriptor_blocking() -> None:
    read_fd, write_fd = os.pipe()
    try:
        await FdSink(write_fd).write(b"x\n")
        assert os.get_blocking(write_fd)
        assert os.read(read_fd, 10) == b"x\n"
    finally:
        os.close(read_fd)
        os.close(write_fd)
