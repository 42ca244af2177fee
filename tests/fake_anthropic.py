"""A fake Anthropic Messages API server for end-to-end tests and benchmarks.

Standard library only (plus the shared plumbing of its sibling `fake_server.py`). It serves
`GET /v1/models` (one model; what `acp-agent login` checks a key with) and
`POST /v1/messages` on 127.0.0.1, streaming (`"stream": true`) exactly as Anthropic frames
it: HTTP/1.1 chunked, `event: NAME\\ndata: {json}\\n\\n` server-sent events in the order

    message_start
      content_block_start (thinking)  thinking_delta ...  signature_delta  content_block_stop
      content_block_start (text)  ping  content_block_delta (text_delta) ...  content_block_stop
      content_block_start (tool_use)  content_block_delta (input_json_delta) ...  ...stop
    message_delta (stop_reason end_turn | tool_use, usage)
    message_stop

and records every request with its headers. A thinking block comes only when the request
enables `thinking`; its signature is checked when the conversation sends it back.

Behaviour is scripted by the same directives as `fake_llm.py`, written in the text of the
last user message:

    (none)                 stream "Anthropic reply to: <prompt without directives>"
    [[tool NAME {json}]]   a tool_use block with that input in several input_json_delta
                           pieces, stop_reason "tool_use"; several directives, several blocks
    [[deltas N]]           stream N one-word text deltas ("w0 ", "w1 ", ...)
    [[deltas N thinking]]  the same as thinking deltas of one signed thinking block (whether
                           or not the request enables thinking), and no text
    [[deltas N tool]]      one tool_use block of `deltas_args` whose input {"words": "w0 ..."}
                           comes one word per input_json_delta
    [[slow SECONDS]]       wait SECONDS between events
    [[status CODE]]        answer HTTP CODE with an Anthropic-shaped error body

When the last user message carries `tool_result` blocks, the reply is instead
"Tool result: <first 200 characters of each result>", so a scripted call never loops.

Like the real API it answers 400 to what the real API rejects: no `anthropic-version`
header, a missing model or max_tokens, roles other than user / assistant, empty text blocks,
tool_use without its tool_result in the next message (and the reverse), an assistant
message ending in whitespace at the end, a thinking budget under 1024 or not under
max_tokens, and thinking blocks with a signature it did not issue. A missing or wrong key
answers 401 when the server was given `api_key`; the key is read from `x-api-key`, or from
`Authorization: Bearer`, which newer SDKs send instead.

In process:

    with FakeAnthropic(api_key="test-key") as fake:
        ...  # point the client at fake.base_url ("http://127.0.0.1:PORT", no /v1)
        fake.requests          # request bodies, in arrival order
        fake.exchanges         # the same with headers, status, outcome and the usage sent

From a shell: `python tests/fake_anthropic.py [--port 0]` prints `http://127.0.0.1:PORT` as
its first stdout line and serves until killed.
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:  # run as a script, or from pytest
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_server import (
    DEFAULT_HOST,
    DELTAS_TOOL,
    BaseExchange,
    FakeHandler,
    FakeServer,
    Script,
    numbered_deltas,
    numbered_tool_deltas,
    parse_script,
    run_cli,
    split_json,
    tool_result_text,
)

__all__ = [
    "AnthropicExchange",
    "FakeAnthropic",
    "anthropic_reply",
    "last_user_text",
    "usage_for",
]

API_VERSION = "2023-06-01"
REPLY_PREFIX = "Anthropic reply to: "
THINKING_PREFIX = "Thinking about: "
MIN_THINKING_BUDGET = 1024


# --- the conversation ---------------------------------------------------------------------


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _text_of(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message that has any (tool results alone carry none)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            text = _text_of(_blocks(message))
            if text:
                return text
    return ""


def anthropic_reply(prompt: str) -> str:
    """The text streamed for a prompt without tool, deltas or status directives."""
    return REPLY_PREFIX + parse_script(prompt).text


def _tool_results(body: dict[str, Any]) -> list[str] | None:
    """The text of the tool results in the last message, or None if it carries none."""
    messages = body.get("messages") or []
    if not messages or not isinstance(messages[-1], dict) or messages[-1].get("role") != "user":
        return None
    results = [b for b in _blocks(messages[-1]) if b.get("type") == "tool_result"]
    if not results:
        return None
    texts = []
    for result in results:
        content = result.get("content")
        if isinstance(content, list):
            content = _text_of([c for c in content if isinstance(c, dict)])
        texts.append(str(content or ""))
    return texts


def usage_for(body: dict[str, Any], output_tokens: int) -> dict[str, int]:
    """The usage reported for a request: input ~ its JSON length / 4, output as streamed."""
    sent = json.dumps([body.get("system"), body.get("messages"), body.get("tools")])
    return {
        "input_tokens": max(1, len(sent) // 4),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def _request_problem(body: Any, signatures: set[str]) -> str | None:
    """What the Messages API would answer 400 to, or None."""
    if not isinstance(body, dict):
        return "There was an issue with the JSON body of your request."
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Field required"
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            return f"thinking.enabled.budget_tokens: Input should be >= {MIN_THINKING_BUDGET}"
        if max_tokens <= budget:
            return "`max_tokens` must be greater than `thinking.budget_tokens`."
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    pending: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            role = message.get("role") if isinstance(message, dict) else None
            return f'messages.{index}.role: Input should be "user" or "assistant", got {role!r}'
        blocks = _blocks(message)
        if not blocks:
            return f"messages.{index}: all messages must have non-empty content"
        for number, block in enumerate(blocks):
            if block.get("type") == "text" and not block.get("text"):
                return f"messages.{index}.content.{number}: text content blocks must be non-empty"
            if block.get("type") == "thinking" and block.get("signature") not in signatures:
                return f"messages.{index}.content.{number}: Invalid `signature` in `thinking` block"
        answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if pending and message["role"] == "user":
            missing = [i for i in pending if i not in answered]
            if missing:
                return (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
        elif pending:
            return (
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(pending)}."
            )
        unexpected = [i for i in answered if i not in pending]
        if unexpected:
            return (
                f"messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {', '.join(map(str, unexpected))}. Each `tool_result` block must have "
                "a corresponding `tool_use` block in the previous message."
            )
        pending = []
        if message["role"] == "assistant":
            pending = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
    if pending:
        return (
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(pending)}."
        )
    last = messages[-1]
    if last["role"] == "assistant":
        final = _blocks(last)[-1]
        text = str(final.get("text"))
        if final.get("type") == "text" and text != text.rstrip():
            return "final assistant content cannot end with trailing whitespace"
    elif isinstance(thinking, dict) and thinking.get("type") == "enabled" and len(messages) > 1:
        continued = any(b.get("type") == "tool_result" for b in _blocks(last))
        first = _blocks(messages[-2])[0].get("type")
        if continued and first not in ("thinking", "redacted_thinking"):
            return (
                f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block."
            )
    return None


# --- recording ----------------------------------------------------------------------------


@dataclass
class AnthropicExchange(BaseExchange):
    """One request and what became of it."""

    usage: dict[str, int] | None = None
    """The usage the answer reported (its `message_delta` totals)."""

    @property
    def api_key(self) -> str | None:
        """The key presented: `x-api-key`, or the bearer token newer SDKs send instead."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None


class FakeAnthropic(FakeServer[AnthropicExchange]):
    """The server in a background thread; a context manager.

    `api_key`: when given, requests must carry `x-api-key: <api_key>` (else 401).
    `base_url` is the API root the SDK takes: requests go to `{base_url}/v1/messages`.
    """

    name = "fake-anthropic"
    label = "Anthropic"
    exchange_class = AnthropicExchange

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        api_key: str | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(host, port, verbose=verbose)
        self.api_key = api_key
        self.signatures: set[str] = set()

    @property
    def handler(self) -> type[_Handler]:
        return _Handler

    def _is_request(self, path: str) -> bool:
        """The /v1/messages requests count as `requests`."""
        return path.split("?")[0].endswith("/messages")

    def _new_signature(self) -> str:
        signature = secrets.token_urlsafe(48)
        with self._changed:
            self.signatures.add(signature)
        return signature


# --- HTTP ---------------------------------------------------------------------------------


class _Handler(FakeHandler):
    server_version = "fake-anthropic/1.0"

    def do_GET(self) -> None:
        self._serve(None, self._get)

    def _get(self, exchange: AnthropicExchange, body: None) -> None:
        fake = self.server.fake
        if self.path.split("?")[0].rstrip("/") != "/v1/models":
            self._error(exchange, 404, "not_found_error", "Not found")
        elif fake.api_key is not None and exchange.api_key != fake.api_key:
            self._error(exchange, 401, "authentication_error", "invalid x-api-key")
        else:
            model = {"type": "model", "id": "claude-fake", "display_name": "Claude Fake"}
            page = {"data": [model], "has_more": False, "first_id": "claude-fake"}
            self._send_json(exchange, 200, page)

    def _gone(self, exchange: AnthropicExchange) -> None:
        self.close_connection = True
        self.server.fake._finish(exchange, "disconnected", exchange.status or 200)

    def _answer(self, exchange: AnthropicExchange, body: Any) -> None:
        fake = self.server.fake
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self._error(exchange, 404, "not_found_error", "Not found")
            return
        if fake.api_key is not None and exchange.api_key != fake.api_key:
            self._error(exchange, 401, "authentication_error", "invalid x-api-key")
            return
        if not self.headers.get("anthropic-version"):
            self._error(
                exchange, 400, "invalid_request_error", "anthropic-version: header is required"
            )
            return
        problem = _request_problem(body, fake.signatures)
        if problem is not None:
            self._error(exchange, 400, "invalid_request_error", problem)
            return
        results = _tool_results(body)
        script = parse_script(last_user_text(body))
        if results is None and script.status is not None:
            self._scripted_error(exchange, script.status)
            return
        reply = _Reply.build(body, script, results, fake)
        exchange.usage = reply.usage
        if body.get("stream"):
            self._stream(exchange, reply, script.slow)
        else:
            self._send_json(exchange, 200, reply.whole())

    # errors

    def _scripted_error(self, exchange: AnthropicExchange, status: int) -> None:
        kinds = {
            400: ("invalid_request_error", "Scripted bad request."),
            401: ("authentication_error", "invalid x-api-key"),
            403: ("permission_error", "Your API key does not have permission to use this."),
            404: ("not_found_error", "model: not found"),
            413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
            429: ("rate_limit_error", "Number of request tokens has exceeded your rate limit."),
            500: ("api_error", "Internal server error"),
            529: ("overloaded_error", "Overloaded"),
        }
        kind, message = kinds.get(status, ("api_error", f"Scripted error (HTTP {status})."))
        headers = {"retry-after": "0"} if status in (429, 529) else {}
        self._error(exchange, status, kind, message, headers)

    def _error(
        self,
        exchange: AnthropicExchange,
        status: int,
        kind: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        payload = {"type": "error", "error": {"type": kind, "message": message}}
        self._send_json(exchange, status, payload, headers)

    # writing

    def _common_headers(self) -> None:
        self.send_header("request-id", f"req_{secrets.token_hex(12)}")
        self.send_header("anthropic-organization-id", "00000000-0000-0000-0000-000000000000")

    def _stream(self, exchange: AnthropicExchange, reply: _Reply, slow: float) -> None:
        self._start_stream(exchange)
        self._write_events(reply.events(), slow)
        self._end_stream(exchange)


# --- payloads -----------------------------------------------------------------------------


@dataclass
class _Reply:
    """One scripted answer: its content blocks, as stream events or one whole message."""

    model: str
    thinking: str | None
    signature: str
    texts: list[str]
    tools: list[tuple[str, str, str]]
    """(id, name, input JSON)"""
    usage: dict[str, int]
    thinking_pieces: list[str] | None = None
    """The thinking deltas, when not the words of `thinking`."""
    tool_pieces: list[str] | None = None
    """The input_json deltas of the (single) tool block, when not its JSON cut in three."""
    id: str = field(default_factory=lambda: f"msg_{secrets.token_hex(12)}")

    @classmethod
    def build(
        cls,
        body: dict[str, Any],
        script: Script,
        results: list[str] | None,
        fake: FakeAnthropic,
    ) -> _Reply:
        tools: list[tuple[str, str, str]] = []
        thinking_pieces = tool_pieces = None
        if results is not None:
            texts = _words(tool_result_text(results))
        elif script.deltas is not None and script.deltas_kind == "thinking":
            texts, thinking_pieces = [], numbered_deltas(script.deltas)
        elif script.deltas is not None and script.deltas_kind == "tool":
            texts, tool_pieces = [], numbered_tool_deltas(script.deltas)
            tools = [(f"toolu_{secrets.token_hex(12)}", DELTAS_TOOL, "".join(tool_pieces))]
        elif script.deltas is not None:
            texts = numbered_deltas(script.deltas)
        else:
            texts = [] if script.tools else _words(REPLY_PREFIX + script.text)
            tools = [
                (f"toolu_{secrets.token_hex(12)}", name, json.dumps(arguments))
                for name, arguments in script.tools
            ]
        thinking_on = isinstance(body.get("thinking"), dict) and (
            body["thinking"].get("type") == "enabled"
        )
        topic = "the tool result" if results is not None else script.text or "the request"
        thinking = THINKING_PREFIX + topic if thinking_on else None
        if thinking_pieces is not None:
            thinking = "".join(thinking_pieces)
        output = len(texts) + sum(max(1, len(j) // 4) for _, _, j in tools)
        output += len(thinking_pieces or (_words(thinking) if thinking else []))
        return cls(
            model=str(body["model"]),
            thinking=thinking,
            signature=fake._new_signature() if thinking else "",
            texts=texts,
            tools=tools,
            usage=usage_for(body, output),
            thinking_pieces=thinking_pieces,
            tool_pieces=tool_pieces,
        )

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.tools else "end_turn"

    def events(self) -> Iterator[tuple[str, dict[str, Any]]]:
        start_usage = {**self.usage, "output_tokens": 1}
        yield "message_start", {"type": "message_start", "message": self._message([], start_usage)}
        index = 0
        if self.thinking is not None:
            yield _block_start(index, {"type": "thinking", "thinking": "", "signature": ""})
            yield "ping", {"type": "ping"}
            for piece in self.thinking_pieces or _words(self.thinking):
                yield _block_delta(index, {"type": "thinking_delta", "thinking": piece})
            yield _block_delta(index, {"type": "signature_delta", "signature": self.signature})
            yield _block_stop(index)
            index += 1
        if self.texts:
            yield _block_start(index, {"type": "text", "text": ""})
            if index == 0:
                yield "ping", {"type": "ping"}
            for piece in self.texts:
                yield _block_delta(index, {"type": "text_delta", "text": piece})
            yield _block_stop(index)
            index += 1
        for tool_id, name, arguments in self.tools:
            yield _block_start(
                index, {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
            )
            for piece in ["", *(self.tool_pieces or split_json(arguments, 3))]:
                yield _block_delta(index, {"type": "input_json_delta", "partial_json": piece})
            yield _block_stop(index)
            index += 1
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": self.usage["output_tokens"]},
            },
        )
        yield "message_stop", {"type": "message_stop"}

    def whole(self) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if self.thinking is not None:
            content.append(
                {"type": "thinking", "thinking": self.thinking, "signature": self.signature}
            )
        if self.texts:
            content.append({"type": "text", "text": "".join(self.texts)})
        content.extend(
            {"type": "tool_use", "id": i, "name": n, "input": json.loads(a)}
            for i, n, a in self.tools
        )
        message = self._message(content, self.usage)
        message["stop_reason"] = self.stop_reason
        return message

    def _message(self, content: list[dict[str, Any]], usage: dict[str, int]) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }


def _block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {
        "type": "content_block_start",
        "index": index,
        "content_block": block,
    }


def _block_delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def _block_stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def _words(text: str) -> list[str]:
    """Word-sized pieces that join back to `text` exactly."""
    pieces: list[str] = []
    start = 0
    for position in range(1, len(text)):
        if text[position - 1].isspace() and not text[position].isspace():
            pieces.append(text[start:position])
            start = position
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


# --- CLI ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    return run_cli(
        argv,
        "Fake Anthropic Messages API; prints its base URL, serves until killed.",
        lambda args: FakeAnthropic(
            args.host, args.port, api_key=args.api_key, verbose=args.verbose
        ),
        lambda parser: parser.add_argument(
            "--api-key", help="require this x-api-key (default: accept any)"
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
