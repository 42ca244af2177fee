"""The fake OpenAI server itself: wire framing, directives, recording, CLI (no agent here)."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from typing import Any

import pytest
from e2e_support import E2E_DIR
from fake_llm import FakeLLM, fake_reply, parse_script

pytestmark = pytest.mark.e2e


def post(fake: FakeLLM, body: dict[str, Any]) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    connection.request(
        "POST",
        "/v1/chat/completions",
        json.dumps(body),
        {"Content-Type": "application/json", "Authorization": "Bearer sk-test-secret"},
    )
    return connection.getresponse()


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def events(raw: bytes) -> list[Any]:
    """SSE events; asserts OpenAI's framing: every event is one `data: ...` line + blank line."""
    text = raw.decode()
    assert text.endswith("\n\n")
    blocks = text[:-2].split("\n\n")
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks)
    return [b[6:] if b == "data: [DONE]" else json.loads(b[6:]) for b in blocks]


def test_a_stream_is_framed_like_openai_with_a_usage_chunk_and_done() -> None:
    with FakeLLM() as fake:
        response = post(fake, chat("hi there", stream=True, stream_options={"include_usage": True}))
        assert response.status == 200
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        assert response.getheader("Transfer-Encoding") == "chunked"
        received = events(response.read())

    *chunks, usage, done = received
    assert done == "[DONE]"
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    assert all(c["object"] == "chat.completion.chunk" and c["usage"] is None for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == fake_reply("hi there") == "Fake reply to: hi there"
    assert len(chunks) > 3
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "stop"
    assert fake.requests == [chat("hi there", stream=True, stream_options={"include_usage": True})]


def test_a_tool_directive_streams_a_call_with_arguments_in_pieces() -> None:
    arguments = {"path": "src/app.py", "line": 3}
    with FakeLLM() as fake:
        prompt = f"look [[tool read_file {json.dumps(arguments)}]]"
        received = events(post(fake, chat(prompt, stream=True)).read())

    chunks = [e for e in received if e != "[DONE]"]
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"][0]["delta"].get("tool_calls")
    ]
    assert calls[0]["function"] == {"name": "read_file", "arguments": ""}
    assert calls[0]["id"].startswith("call_")
    pieces = [c["function"]["arguments"] for c in calls[1:]]
    assert len(pieces) >= 2
    assert json.loads("".join(pieces)) == arguments
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_tool_result_is_answered_with_its_content_and_a_whole_response_works() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": '[[tool read_file {"path": "a"}]]'},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "x" * 300},
        ],
    }
    with FakeLLM() as fake:
        whole = json.loads(post(fake, body).read())

    assert whole["object"] == "chat.completion"
    assert whole["choices"][0]["message"]["content"] == "Tool result: " + "x" * 200
    assert whole["choices"][0]["finish_reason"] == "stop"


def test_a_tool_call_left_unanswered_is_rejected_like_openai_does() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            },
            {"role": "user", "content": "again"},
        ],
    }
    with FakeLLM() as fake:
        response = post(fake, body)
        error = json.loads(response.read())["error"]

    assert response.status == 400
    assert "call_1" in error["message"]


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, "invalid_request_error"), (429, "tokens"), (500, "server_error")],
)
def test_a_status_directive_answers_that_error_with_an_openai_body(status: int, kind: str) -> None:
    with FakeLLM() as fake:
        response = post(fake, chat(f"[[status {status}]] hi", stream=True))
        error = json.loads(response.read())["error"]

    assert response.status == status
    assert error["type"] == kind and error["message"]
    assert set(error) == {"message", "type", "param", "code"}
    if status == 401:
        assert "sk-test-secret" in error["message"], "echoes the key, to test redaction"
    assert fake.exchanges[0].outcome == "error"


def test_a_counted_status_fails_only_the_first_sends_and_can_carry_retry_after() -> None:
    with FakeLLM() as fake:
        first = post(fake, chat("[[status 503 2]] [[retry-after 0.5]] hi"))
        first.read()
        second = post(fake, chat("[[status 503 2]] [[retry-after 0.5]] hi"))
        second.read()
        third = json.loads(post(fake, chat("[[status 503 2]] [[retry-after 0.5]] hi")).read())

    assert (first.status, second.status) == (503, 503)
    assert first.getheader("retry-after") == "0.5"
    assert third["choices"][0]["message"]["content"] == "Fake reply to: hi"


def test_a_drop_directive_cuts_the_body_short() -> None:
    with FakeLLM() as fake:
        response = post(fake, chat("[[drop]] a b c d", stream=True))
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()

    received = cut.value.partial.decode()
    assert received.count("data: ") == 3  # the opening chunk and two deltas
    assert "[DONE]" not in received and 'finish_reason":"stop' not in received
    assert fake.exchanges[0].outcome == "dropped"


def test_length_slow_and_deltas_directives() -> None:
    with FakeLLM() as fake:
        length = events(post(fake, chat("[[length]] story", stream=True)).read())
        started = time.monotonic()
        slow = events(post(fake, chat("[[slow 0.05]] a b", stream=True)).read())
        took = time.monotonic() - started
        many = events(post(fake, chat("[[deltas 500]]", stream=True)).read())

    assert length[-2]["choices"][0]["finish_reason"] == "length"
    assert took >= 0.05 * (len(slow) - 3)
    texts = [c["choices"][0]["delta"].get("content") for c in many[1:-2]]
    assert texts == [f"w{i} " for i in range(500)]


def test_a_client_hanging_up_mid_stream_is_recorded_and_does_not_hurt_the_server() -> None:
    with FakeLLM() as fake:
        sock = socket.create_connection(("127.0.0.1", fake.port))
        # 30 s between deltas: only a hang-up noticed during the pause ends it within the wait.
        body = json.dumps(chat("[[slow 30]] one two three", stream=True)).encode()
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        hung_up = time.monotonic()
        sock.close()
        gone = fake.wait_for_disconnect(timeout=10.0)
        assert gone is not None and gone.disconnected_at is not None
        assert gone.disconnected_at >= hung_up
        assert post(fake, chat("still there?")).status == 200


def test_directives_parse_and_leave_the_rest_of_the_prompt() -> None:
    script = parse_script('a [[tool t {"x": "]]"}]] b [[slow 0.2]] [[bogus]] [[deltas 3]] c')
    assert script.tools == [("t", {"x": "]]"})]
    assert (script.slow, script.deltas, script.status) == (0.2, 3, None)
    assert script.text == "a b [[bogus]] c"


def test_the_cli_prints_its_base_url_first_and_serves_until_killed() -> None:
    process = subprocess.Popen(
        [sys.executable, str(E2E_DIR.parent / "fake_llm.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        connection = http.client.HTTPConnection(url.removeprefix("http://").removesuffix("/v1"))
        connection.request("GET", "/v1/models")
        assert json.loads(connection.getresponse().read())["object"] == "list"
    finally:
        process.terminate()
        assert process.wait(timeout=5) == 0
