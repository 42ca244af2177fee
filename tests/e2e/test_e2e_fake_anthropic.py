"""The fake Anthropic server itself: SSE framing, directives, validation, CLI (no agent here)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from typing import Any

import pytest
from e2e_support import E2E_DIR
from fake_anthropic import FakeAnthropic, anthropic_reply

pytestmark = pytest.mark.e2e

KEY = "test-key-anthropic"


def post(fake: FakeAnthropic, body: dict[str, Any], key: str = KEY) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    headers = {
        "Content-Type": "application/json",
        "x-api-key": key,
        "anthropic-version": "2023-06-01",
    }
    connection.request("POST", "/v1/messages", json.dumps(body), headers)
    return connection.getresponse()


def messages(*turns: Any, **extra: Any) -> dict[str, Any]:
    listed = [{"role": r, "content": c} for r, c in zip(turns[::2], turns[1::2], strict=True)]
    return {"model": "claude-x", "max_tokens": 4096, "messages": listed, **extra}


def events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs; asserts Anthropic's framing: `event:` line, `data:` line."""
    text = raw.decode()
    assert text.endswith("\n\n")
    found = []
    for block in text[:-2].split("\n\n"):
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        payload = json.loads(data[6:])
        assert payload["type"] == name[7:]
        found.append((name[7:], payload))
    return found


def test_a_stream_has_the_exact_event_sequence_and_reports_usage() -> None:
    with FakeAnthropic(api_key=KEY) as fake:
        response = post(fake, messages("user", "hi there", stream=True))
        assert response.status == 200
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        received = events(response.read())

    names = [name for name, _ in received]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-4:] == [
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert set(names[3:-3]) == {"content_block_delta"}
    deltas = [d["delta"] for n, d in received if n == "content_block_delta"]
    assert all(d["type"] == "text_delta" for d in deltas)
    assert "".join(d["text"] for d in deltas) == anthropic_reply("hi there")
    assert len(deltas) > 2
    final = received[-2][1]
    assert final["delta"]["stop_reason"] == "end_turn"
    assert final["usage"]["output_tokens"] == len(deltas)
    assert received[0][1]["message"]["usage"]["input_tokens"] > 0
    [exchange] = fake.exchanges
    assert exchange.api_key == KEY
    assert exchange.usage is not None and exchange.usage["output_tokens"] == len(deltas)


def test_a_tool_directive_streams_a_tool_use_block_and_its_result_gets_an_answer() -> None:
    arguments = {"path": "src/app.py"}
    with FakeAnthropic() as fake:
        prompt = f"look [[tool read_file {json.dumps(arguments)}]]"
        received = events(post(fake, messages("user", prompt, stream=True)).read())
        [start] = [d["content_block"] for n, d in received if n == "content_block_start"]
        pieces = [d["delta"]["partial_json"] for n, d in received if n == "content_block_delta"]
        tool_use = {**start, "input": arguments}
        follow_up = messages(
            "user",
            prompt,
            "assistant",
            [tool_use],
            "user",
            [{"type": "tool_result", "tool_use_id": start["id"], "content": "print(1)"}],
        )
        answer = json.loads(post(fake, follow_up).read())

    assert start["type"] == "tool_use" and start["name"] == "read_file"
    assert pieces[0] == "" and len(pieces) >= 3
    assert json.loads("".join(pieces)) == arguments
    assert received[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert answer["content"] == [{"type": "text", "text": "Tool result: print(1)"}]


def test_thinking_comes_signed_and_only_its_own_signatures_are_accepted_back() -> None:
    thinking = {"type": "enabled", "budget_tokens": 2048}
    with FakeAnthropic() as fake:
        reply = json.loads(post(fake, messages("user", "ponder", thinking=thinking)).read())
        signed, text = reply["content"]
        accepted = post(
            fake, messages("user", "ponder", "assistant", reply["content"], "user", "ok")
        )
        forged = {**signed, "signature": "forged"}
        refused = post(fake, messages("user", "ponder", "assistant", [forged, text], "user", "ok"))

    assert signed["type"] == "thinking" and signed["signature"]
    assert text == {"type": "text", "text": anthropic_reply("ponder")}
    assert accepted.status == 200
    assert refused.status == 400
    assert "signature" in json.loads(refused.read())["error"]["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(messages("user", ""), "non-empty", id="empty-text"),
        pytest.param(
            messages("user", "hi", thinking={"type": "enabled", "budget_tokens": 512}),
            "budget_tokens",
            id="small-budget",
        ),
        pytest.param(
            messages(
                "user",
                "hi",
                "assistant",
                [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}],
                "user",
                "go on",
            ),
            "without `tool_result`",
            id="unanswered-tool-use",
        ),
        pytest.param(
            messages("user", [{"type": "tool_result", "tool_use_id": "toolu_9"}]),
            "unexpected `tool_use_id`",
            id="orphan-tool-result",
        ),
        pytest.param(messages("system", "be nice"), "role", id="system-role"),
    ],
)
def test_what_the_api_rejects_is_answered_400_like_anthropic(
    body: dict[str, Any], message: str
) -> None:
    with FakeAnthropic() as fake:
        response = post(fake, body)
        error = json.loads(response.read())

    assert response.status == 400
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert message in error["error"]["message"]


def test_a_wrong_key_is_answered_401() -> None:
    with FakeAnthropic(api_key=KEY) as fake:
        response = post(fake, messages("user", "hi"), key="not-the-key")
        error = json.loads(response.read())

    assert response.status == 401
    assert error["error"]["type"] == "authentication_error"
    assert "not-the-key" not in json.dumps(error)


def test_the_cli_prints_its_base_url_and_serves() -> None:
    process = subprocess.Popen(
        [sys.executable, str(E2E_DIR.parent / "fake_anthropic.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        host, port = base_url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request(
            "POST",
            "/v1/messages",
            json.dumps(messages("user", "ping")),
            {"anthropic-version": "2023-06-01", "x-api-key": KEY},
        )
        reply = json.loads(connection.getresponse().read())
        assert reply["content"][0]["text"] == anthropic_reply("ping")
    finally:
        process.terminate()
        process.wait(5)
        if process.stdout is not None:
            process.stdout.close()
