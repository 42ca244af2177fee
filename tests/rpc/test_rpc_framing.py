from __future__ import annotations

import pytest

from acp_agent.rpc.framing import decode_frame, encode_frame, read_lines

pytestmark = pytest.mark.anyio


class Chunks:
    """A `ByteSource` that hands out the given chunks, then end of input."""

    def __init__(self, *chunks: bytes) -> None:
        self._chunks = list(chunks)

    async def read(self) -> bytes:
        return self._chunks.pop(0) if self._chunks else b""


async def lines(*chunks: bytes, max_bytes: int | None = None) -> list[bytes]:
    source = Chunks(*chunks)
    frames = read_lines(source) if max_bytes is None else read_lines(source, max_bytes)
    return [line async for line in frames]


async def test_a_line_split_across_chunks_is_one_frame() -> None:
    assert await lines(b'{"a"', b":", b"1}", b"\n") == [b'{"a":1}']


async def test_a_line_split_in_every_byte_is_one_frame() -> None:
    message = b'{"jsonrpc":"2.0","id":1,"method":"x"}\n'
    chunks = [message[i : i + 1] for i in range(len(message))]
    assert await lines(*chunks) == [message.rstrip(b"\n")]


async def test_several_frames_in_one_chunk_are_split() -> None:
    assert await lines(b'{"a":1}\n{"b":2}\n{"c":3}\n') == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


async def test_a_chunk_may_end_one_frame_and_start_the_next() -> None:
    assert await lines(b'{"a":1}\n{"b"', b":2}\n") == [b'{"a":1}', b'{"b":2}']


async def test_crlf_terminators_are_stripped() -> None:
    assert await lines(b'{"a":1}\r\n{"b":2}\r\n') == [b'{"a":1}', b'{"b":2}']


async def test_a_crlf_split_between_chunks_is_stripped() -> None:
    assert await lines(b'{"a":1}\r', b'\n{"b":2}\r\n') == [b'{"a":1}', b'{"b":2}']


async def test_blank_and_whitespace_only_lines_are_ignored() -> None:
    assert await lines(b'\n\n{"a":1}\n \t\r\n\r\n{"b":2}\n\n') == [b'{"a":1}', b'{"b":2}']


async def test_a_final_unterminated_line_is_a_frame() -> None:
    assert await lines(b'{"a":1}\n{"b"', b":2}") == [b'{"a":1}', b'{"b":2}']


async def test_empty_input_yields_no_frames() -> None:
    assert await lines() == []
    assert await lines(b"\n  \n") == []


async def test_a_line_of_exactly_the_limit_is_kept() -> None:
    assert await lines(b"x" * 16 + b"\n", max_bytes=16) == [b"x" * 16]


async def test_an_over_limit_line_spanning_chunks_becomes_one_empty_frame() -> None:
    frames = await lines(b"x" * 10, b"x" * 10, b"x" * 10, b'x\n{"ok":1}\n', max_bytes=16)
    assert frames == [b"", b'{"ok":1}']


async def test_an_over_limit_line_inside_one_chunk_becomes_one_empty_frame() -> None:
    frames = await lines(b'{"a":1}\n' + b"x" * 40 + b'\n{"ok":1}\n', max_bytes=16)
    assert frames == [b'{"a":1}', b"", b'{"ok":1}']


async def test_an_over_limit_line_completed_in_a_later_chunk_becomes_one_empty_frame() -> None:
    frames = await lines(b"x" * 10, b"x" * 10 + b'\n{"ok":1}\n', max_bytes=16)
    assert frames == [b"", b'{"ok":1}']


async def test_the_limit_holds_however_the_line_is_chunked() -> None:
    line = b"y" * 17 + b"\n"
    for size in range(1, len(line) + 1):
        chunks = [line[i : i + size] for i in range(0, len(line), size)]
        assert await lines(*chunks, b'{"ok":1}\n', max_bytes=16) == [b"", b'{"ok":1}'], size


async def test_an_over_limit_final_unterminated_line_is_one_empty_frame() -> None:
    assert await lines(b'{"a":1}\n' + b"z" * 40, max_bytes=16) == [b'{"a":1}', b""]


# --- lone surrogates --------------------------------------------------------------------------


def test_a_lone_surrogate_escape_decodes_to_the_replacement_character() -> None:
    frame = rb'{"text": "a\ud800b", "\udfff": ["x\ude00"], "n": 1}'
    assert decode_frame(frame) == {"text": "a\ufffdb", "\ufffd": ["x\ufffd"], "n": 1}


def test_an_escaped_surrogate_pair_decodes_to_its_one_character() -> None:
    assert decode_frame(rb'{"text": "\ud83d\ude00 \uD83D\uDE00"}') == {
        "text": "\U0001f600 \U0001f600"
    }


def test_a_pair_in_the_wrong_order_is_two_replacement_characters() -> None:
    assert decode_frame(rb'["\ude00\ud83d"]') == ["\ufffd\ufffd"]


def test_an_escaped_backslash_before_u_d800_stays_text() -> None:
    assert decode_frame(rb'["\\ud800"]') == ["\\ud800"]


def test_a_decoded_frame_always_encodes_as_utf_8() -> None:
    value = decode_frame(rb'{"a": ["\ud800", {"\udbff": "\udc00"}]}')
    assert encode_frame(value).decode("utf-8") == '{"a":["\ufffd",{"\ufffd":"\ufffd"}]}\n'
