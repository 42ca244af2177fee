"""A fake OpenAI-compatible Chat Completions server for end-to-end tests and benchmarks.

Standard library only (plus the server plumbing of its sibling `fake_server.py`). It
serves `POST /v1/chat/completions` (streaming and not), `POST /v1/responses` (the Responses
API, streaming and not; see `_ResponsesReply`) and `GET /v1/models` on 127.0.0.1,
frames streams exactly like OpenAI (HTTP/1.1 chunked, `data: {chat.completion.chunk}\\n\\n`
events, a usage chunk with empty `choices` when `stream_options.include_usage` is set, then
`data: [DONE]\\n\\n`), and records every request.

Behaviour is scripted by directives in the text of the LAST user message, so a test needs
no setup beyond writing its prompt:

    (none)                 stream "Fake reply to: <prompt without directives>" word by word
    [[tool NAME {json}]]   stream a call of tool NAME with those arguments (split over several
                           deltas), finish_reason "tool_calls"; several directives make
                           parallel calls
    [[slow SECONDS]]       wait SECONDS between deltas (also applies to tool follow-ups)
    [[deltas N]]           stream N one-word deltas ("w0 ", "w1 ", ...) as fast as possible
    [[deltas N thinking]]  the same as reasoning (`reasoning_content`, as DeepSeek sends it)
    [[deltas N tool]]      one call of `deltas_args` whose arguments {"words": "w0 w1 ..."}
                           come one word per delta
    [[status CODE]]        answer HTTP CODE (401, 429, 500, ...) with an OpenAI-shaped error
                           body; a 401 message quotes the presented key, as OpenAI's does;
                           a 429 carries `retry-after: 1`
    [[status CODE N]]      the same for the first N requests of this exact conversation only,
                           then answer normally (a transient failure, to test retries)
    [[retry-after S]]      send `retry-after: S` with a scripted error
    [[drop]]               stream two deltas, then close the connection mid-body (no
                           finish_reason, no [DONE], no terminating HTTP chunk)
    [[drop N]]             the same for the first N sends of this exact conversation only
    [[length]]             stream the reply, then finish_reason "length"

The Responses API takes the same directives (not [[drop]] or [[length]]); `[[deltas N thinking]]`
streams reasoning summary deltas there, and tool calls come as `function_call` items.

When the request's last message is a `tool` message, the reply is instead
"Tool result: <first 200 characters of the tool content>" (one line per trailing tool
message), so a scripted tool call never loops; only [[slow]] still applies.

Like OpenAI, it answers 400 when the conversation is malformed: a tool message that answers
no pending call, or an assistant tool call left without its tool message.

In process:

    with FakeLLM() as fake:
        ...  # point the client at fake.base_url ("http://127.0.0.1:PORT/v1")
        fake.requests          # request bodies, in arrival order
        fake.exchanges         # the same with headers, outcome, disconnect time
        fake.wait_for_disconnect(timeout=1.0)

From a shell (benchmarks): `python tests/fake_llm.py [--port 0]` prints
`http://127.0.0.1:PORT/v1` as its first stdout line and serves until killed.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
    dumps,
    numbered_deltas,
    numbered_tool_deltas,
    parse_script,
    run_cli,
    split_json,
    tool_result_text,
)

__all__ = [
    "Exchange",
    "FakeLLM",
    "Script",
    "fake_reply",
    "last_user_text",
    "parse_script",
]

REPLY_PREFIX = "Fake reply to: "


# --- the conversation ---------------------------------------------------------------------


def fake_reply(prompt: str) -> str:
    """The text the server streams for a prompt without tool, status or deltas directives."""
    return REPLY_PREFIX + parse_script(prompt).text


def message_text(message: dict[str, Any]) -> str:
    """The text of a message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message)
    return ""


def _conversation_problem(messages: Any) -> str | None:
    """What OpenAI would reject in this message list, or None."""
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array."
    pending: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"Invalid type for 'messages[{index}]': expected an object."
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value: '{role}'. Supported values are: 'system', 'user', ..."
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            pending.remove(call_id)
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}"
            )
        if role == "assistant":
            pending = [call.get("id") for call in message.get("tool_calls") or []]
    if pending:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(pending)}"
        )
    return None


# --- recording ----------------------------------------------------------------------------


@dataclass
class Exchange(BaseExchange):
    """One request and what became of it.

    `outcome`: pending | completed | error | dropped (our [[drop]]) | disconnected (client
    went away)."""

    disconnected_at: float | None = None

    @property
    def disconnected(self) -> bool:
        return self.outcome == "disconnected"

    def _end(self, outcome: str) -> None:
        super()._end(outcome)
        if outcome == "disconnected":
            self.disconnected_at = self.ended


class FakeLLM(FakeServer[Exchange]):
    """The server in a background thread; a context manager."""

    name = "fake-llm"
    label = "LLM"
    base_path = "/v1"
    exchange_class = Exchange

    def __init__(self, host: str = DEFAULT_HOST, port: int = 0, *, verbose: bool = False) -> None:
        super().__init__(host, port, verbose=verbose)
        self._sends: dict[str, int] = {}
        self.models_keys: set[str] | None = None
        """When set, `GET /models` answers 401 (quoting the key, as OpenAI does) to a key
        not in it: what `acp-agent login` checks a key with."""
        self.model_list: list[str] | None = ["fake-model"]
        """The model ids `GET /models` lists; None: it answers 404 (a server without one)."""
        self.model_list_gate: threading.Event | None = None
        """When set, `GET /models` answers only once the event is set (a slow gateway)."""

    @property
    def handler(self) -> type[_Handler]:
        return _Handler

    # what was seen

    def _is_request(self, path: str) -> bool:
        """The chat completion (and Responses API) requests count as `requests`."""
        return path.endswith(("/chat/completions", "/responses"))

    def clear(self) -> None:
        with self._changed:
            super().clear()
            self._sends.clear()

    def wait_for(self, predicate: Callable[[list[Exchange]], Any], timeout: float = 5.0) -> Any:
        """The first truthy `predicate(exchanges)` within `timeout` seconds, else None."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = predicate(self.exchanges)
                remaining = deadline - time.monotonic()
                if result or remaining <= 0:
                    return result or None
                self._changed.wait(remaining)

    def wait_for_disconnect(self, timeout: float = 5.0) -> Exchange | None:
        """The first exchange whose client hung up mid-answer, waiting up to `timeout`."""
        return self.wait_for(
            lambda exchanges: next((e for e in exchanges if e.disconnected), None), timeout
        )

    # used by the handler

    def _should_fail(self, body: dict[str, Any], script: Script) -> bool:
        """Whether a scripted error applies to this send of the conversation."""
        return self._among_first_sends(body, script.status_times)

    def _should_drop(self, body: dict[str, Any], script: Script) -> bool:
        return script.drop and self._among_first_sends(body, script.drop_times)

    def _among_first_sends(self, body: dict[str, Any], times: int | None) -> bool:
        """Whether this send of the conversation is one of its first `times` (None: any)."""
        if times is None:
            return True
        key = json.dumps(body.get("messages"), sort_keys=True)
        with self._changed:
            sent = self._sends[key] = self._sends.get(key, 0) + 1
        return sent <= times


# --- HTTP ---------------------------------------------------------------------------------


class _Handler(FakeHandler):
    server_version = "fake-openai/1.0"

    # routes

    def do_GET(self) -> None:
        self._serve(None, self._get)

    def _get(self, exchange: Exchange, body: None) -> None:
        if self.path.rstrip("/").endswith("/models"):
            keys = self.server.fake.models_keys
            key = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if keys is not None and key not in keys:
                self._send_status(exchange, 401, {}, None)
                return
            fake = self.server.fake
            if fake.model_list_gate is not None:
                fake.model_list_gate.wait()
            if fake.model_list is None:
                self._send_json(exchange, 404, self._not_found())
                return
            listed = [
                {"id": model_id, "object": "model", "created": 0, "owned_by": "fake"}
                for model_id in fake.model_list
            ]
            self._send_json(exchange, 200, {"object": "list", "data": listed})
        else:
            self._send_json(exchange, 404, self._not_found())

    def _answer(self, exchange: Exchange, body: Any) -> None:
        path = self.path.rstrip("/")
        if not path.endswith(("/chat/completions", "/responses")):
            self._send_json(exchange, 404, self._not_found())
            return
        if not isinstance(body, dict):
            self._send_json(
                exchange,
                400,
                _error_body(
                    "We could not parse the JSON body of your request.",
                    "invalid_request_error",
                ),
            )
            return
        if path.endswith("/responses"):
            self._responses(exchange, body)
        else:
            self._chat(exchange, body)

    def _not_found(self) -> dict[str, Any]:
        return _error_body(f"Invalid URL ({self.command} {self.path})", "invalid_request_error")

    # chat completions

    def _chat(self, exchange: Exchange, body: dict[str, Any]) -> None:
        problem = _conversation_problem(body.get("messages"))
        if problem is not None or not body.get("model"):
            message = problem or "you must provide a model parameter"
            self._send_json(
                exchange, 400, _error_body(message, "invalid_request_error", param="messages")
            )
            return
        messages = body["messages"]
        script = parse_script(last_user_text(body))
        if messages[-1].get("role") == "tool":
            trailing: list[str] = []
            for message in reversed(messages):
                if message.get("role") != "tool":
                    break
                trailing.insert(0, message_text(message))
            text = tool_result_text(trailing)
            script = Script(text=text, slow=script.slow)
            deltas = _words(text)
        elif script.status is not None and self.server.fake._should_fail(body, script):
            self._send_status(exchange, script.status, body, script.retry_after)
            return
        elif script.deltas is not None:
            deltas = numbered_deltas(script.deltas) if script.deltas_kind == "text" else []
        else:
            deltas = [] if script.tools else _words(REPLY_PREFIX + script.text)
        tool_calls = [] if messages[-1].get("role") == "tool" else script.tools
        reasoning: list[str] = []
        pieces: list[str] | None = None
        if script.deltas is not None and messages[-1].get("role") != "tool":
            if script.deltas_kind == "thinking":
                reasoning = numbered_deltas(script.deltas)
            elif script.deltas_kind == "tool":
                pieces = numbered_tool_deltas(script.deltas)
                tool_calls = [(DELTAS_TOOL, json.loads("".join(pieces)))]
        script.drop = self.server.fake._should_drop(body, script)
        if script.drop:
            deltas = [*deltas, "more ", "words "][:2]
        finish = "tool_calls" if tool_calls else "length" if script.length else "stop"
        completion = _Completion(body, deltas, tool_calls, finish, reasoning, pieces)
        if body.get("stream"):
            self._stream(exchange, completion, script)
        else:
            self._whole(exchange, completion, script)

    def _stream(self, exchange: Exchange, completion: _Completion, script: Script) -> None:
        self._start_stream(exchange)
        chunks = completion.chunks(drop=script.drop)
        self._write_events(((None, chunk) for chunk in chunks), script.slow)
        if script.drop:
            self.close_connection = True  # no terminating chunk: the body is cut short
            self.server.fake._finish(exchange, "dropped")
            return
        self._write_event(b"[DONE]")
        self._end_stream(exchange)

    def _whole(self, exchange: Exchange, completion: _Completion, script: Script) -> None:
        if script.slow:
            self._pause(script.slow)
        if script.drop:
            payload = dumps(completion.whole())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self._common_headers()
            self.end_headers()
            self._write(payload[: len(payload) // 2])
            self.close_connection = True
            self.server.fake._finish(exchange, "dropped")
            return
        self._send_json(exchange, 200, completion.whole())

    # responses

    def _responses(self, exchange: Exchange, body: dict[str, Any]) -> None:
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        problem = _input_problem(items)
        if problem is not None or not body.get("model"):
            message = problem or "Missing required parameter: 'model'."
            self._send_json(
                exchange, 400, _error_body(message, "invalid_request_error", param="input")
            )
            return
        script = parse_script(_last_input_text(items))
        reply = _ResponsesReply(body)
        outputs = _trailing_outputs(items)
        if outputs:
            reply.texts = _words(tool_result_text(outputs))
        elif script.status is not None and self.server.fake._should_fail(body, script):
            self._send_status(exchange, script.status, body, script.retry_after)
            return
        elif script.deltas is not None:
            deltas = numbered_deltas(script.deltas)
            if script.deltas_kind == "thinking":
                reply.reasoning = deltas
            elif script.deltas_kind == "tool":
                reply.calls = [(DELTAS_TOOL, numbered_tool_deltas(script.deltas))]
            else:
                reply.texts = deltas
        elif script.tools:
            reply.calls = [
                (name, split_json(json.dumps(arguments), 4)) for name, arguments in script.tools
            ]
        else:
            reply.texts = _words(REPLY_PREFIX + script.text)
        if body.get("stream"):
            self._start_stream(exchange)
            events = ((event["type"], event) for event in reply.events())
            self._write_events(events, script.slow)
            self._end_stream(exchange)
        else:
            if script.slow:
                self._pause(script.slow)
            self._send_json(exchange, 200, reply.response("completed", reply.output()))

    def _send_status(
        self, exchange: Exchange, status: int, body: dict[str, Any], retry_after: str | None
    ) -> None:
        key = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        model = body.get("model", "")
        match status:
            case 401:
                error = _error_body(
                    f"Incorrect API key provided: {key}. You can find your API key at "
                    "https://platform.openai.com/account/api-keys.",
                    "invalid_request_error",
                    code="invalid_api_key",
                )
            case 403:
                error = _error_body(
                    "You are not allowed to sample from this model", "invalid_request_error"
                )
            case 404:
                error = _error_body(
                    f"The model `{model}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    code="model_not_found",
                )
            case 429:
                error = _error_body(
                    f"Rate limit reached for {model} in organization org-fake on tokens per "
                    "min (TPM): Limit 30000, Used 30000, Requested 1000. Please try again in "
                    "2s.",
                    "tokens",
                    code="rate_limit_exceeded",
                )
            case 500:
                error = _error_body(
                    "The server had an error while processing your request. Sorry about that!",
                    "server_error",
                )
            case 503:
                error = _error_body(
                    "The engine is currently overloaded, please try again later.",
                    "server_error",
                )
            case _:
                error = _error_body(f"Scripted error (HTTP {status}).", "server_error")
        if retry_after is None and status == 429:
            retry_after = "1"
        headers = {} if retry_after is None else {"retry-after": retry_after}
        self._send_json(exchange, status, error, headers)

    # writing

    def _common_headers(self) -> None:
        self.send_header("x-request-id", f"req_{secrets.token_hex(16)}")
        self.send_header("openai-processing-ms", "7")
        self.send_header("openai-version", "2020-10-01")


# --- payloads -----------------------------------------------------------------------------


class _Completion:
    """One scripted answer, as stream chunks or as one whole response."""

    def __init__(
        self,
        request: dict[str, Any],
        deltas: list[str],
        tool_calls: list[tuple[str, dict[str, Any]]],
        finish: str,
        reasoning: list[str] | None = None,
        pieces: list[str] | None = None,
    ) -> None:
        """`reasoning`: deltas streamed as `reasoning_content` first; `pieces`: the argument
        deltas of the (single) tool call, instead of its JSON cut in four."""
        self.id = f"chatcmpl-{secrets.token_urlsafe(21)[:29]}"
        self.created = int(time.time())
        self.model = str(request.get("model"))
        self.deltas = deltas
        self.reasoning = reasoning or []
        self.calls = [
            (f"call_{secrets.token_urlsafe(18)[:24]}", name, json.dumps(arguments))
            for name, arguments in tool_calls
        ]
        if pieces is not None:
            self.calls = [(call_id, name, "".join(pieces)) for call_id, name, _ in self.calls]
        self.pieces = pieces
        self.finish = finish
        options = request.get("stream_options")
        self.include_usage = isinstance(options, dict) and options.get("include_usage") is True
        self.prompt_tokens = max(1, len(json.dumps(request.get("messages"))) // 4)
        self.completion_tokens = (
            len(deltas)
            + len(self.reasoning)
            + sum(max(1, len(args) // 4) for _, _, args in self.calls)
        )

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def chunks(self, *, drop: bool = False) -> Iterator[dict[str, Any]]:
        if self.calls and not self.deltas:
            opening: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        else:
            opening = {"role": "assistant", "content": "", "refusal": None}
        yield self._chunk(opening)
        for text in self.reasoning:
            yield self._chunk({"content": None, "reasoning_content": text})
        for text in self.deltas:
            yield self._chunk({"content": text})
        if drop:
            return  # cut short: no tool calls, no finish_reason, no usage
        for index, (call_id, name, arguments) in enumerate(self.calls):
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
            yield self._chunk({"tool_calls": [head]})
            for piece in self.pieces or split_json(arguments, 4):
                yield self._chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                )
        yield self._chunk({}, self.finish)
        if self.include_usage:
            yield {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "service_tier": "default",
                "system_fingerprint": "fp_fake",
                "choices": [],
                "usage": self._usage(),
            }

    def whole(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.deltas) if self.deltas or not self.calls else None,
            "refusal": None,
            "annotations": [],
        }
        if self.calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for call_id, name, args in self.calls
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish}
            ],
            "usage": self._usage(),
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

    def _usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }


class _ResponsesReply:
    """One scripted Responses API answer: reasoning, text and function calls, in that order,
    as stream events (`events`) or one whole response (`response`)."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.id = f"resp_{secrets.token_hex(24)}"
        self.created = int(time.time())
        self.reasoning: list[str] = []
        self.texts: list[str] = []
        self.calls: list[tuple[str, list[str]]] = []
        """(name, argument deltas) of each function call."""
        self._ids = [secrets.token_hex(24) for _ in range(2)]
        self._call_ids = [f"call_{secrets.token_urlsafe(18)[:24]}" for _ in range(8)]

    def response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        request = self.request
        completed = status != "in_progress"
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": request.get("instructions"),
            "max_output_tokens": request.get("max_output_tokens"),
            "max_tool_calls": None,
            "model": str(request.get("model")),
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "prompt_cache_key": None,
            "reasoning": {"effort": None, "summary": None},
            "safety_identifier": None,
            "service_tier": "default",
            "store": False,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": "auto",
            "tools": [],
            "top_logprobs": 0,
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": self._usage() if completed else None,
            "user": None,
            "metadata": {},
        }

    def output(self) -> list[dict[str, Any]]:
        """The finished output items."""
        items: list[dict[str, Any]] = []
        if self.reasoning:
            items.append(self._reasoning_item("".join(self.reasoning)))
        if self.texts:
            items.append(self._message_item("".join(self.texts), "completed"))
        for index, (name, pieces) in enumerate(self.calls):
            items.append(self._call_item(index, name, "".join(pieces), "completed"))
        return items

    def events(self) -> Iterator[dict[str, Any]]:
        number = 0

        def event(kind: str, **fields: Any) -> dict[str, Any]:
            nonlocal number
            number += 1
            return {"type": kind, "sequence_number": number - 1, **fields}

        yield event("response.created", response=self.response("in_progress", []))
        yield event("response.in_progress", response=self.response("in_progress", []))
        index = 0
        if self.reasoning:
            item_id = f"rs_{self._ids[0]}"
            place = {"item_id": item_id, "output_index": index, "summary_index": 0}
            empty = {"type": "reasoning", "id": item_id, "summary": []}
            yield event("response.output_item.added", output_index=index, item=empty)
            part = {"type": "summary_text", "text": ""}
            yield event("response.reasoning_summary_part.added", **place, part=part)
            for piece in self.reasoning:
                yield event(
                    "response.reasoning_summary_text.delta", **place, delta=piece, obfuscation="q8"
                )
            text = "".join(self.reasoning)
            yield event("response.reasoning_summary_text.done", **place, text=text)
            part = {"type": "summary_text", "text": text}
            yield event("response.reasoning_summary_part.done", **place, part=part)
            item = self._reasoning_item(text)
            yield event("response.output_item.done", output_index=index, item=item)
            index += 1
        if self.texts:
            item_id = f"msg_{self._ids[1]}"
            place = {"item_id": item_id, "output_index": index, "content_index": 0}
            item = self._message_item(None, "in_progress")
            yield event("response.output_item.added", output_index=index, item=item)
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            yield event("response.content_part.added", **place, part=part)
            for piece in self.texts:
                yield event(
                    "response.output_text.delta",
                    **place,
                    delta=piece,
                    logprobs=[],
                    obfuscation="x9",
                )
            text = "".join(self.texts)
            yield event("response.output_text.done", **place, text=text, logprobs=[])
            part = {**part, "text": text}
            yield event("response.content_part.done", **place, part=part)
            item = self._message_item(text, "completed")
            yield event("response.output_item.done", output_index=index, item=item)
            index += 1
        for number_of_call, (name, pieces) in enumerate(self.calls):
            item = self._call_item(number_of_call, name, "", "in_progress")
            place = {"item_id": item["id"], "output_index": index}
            yield event("response.output_item.added", output_index=index, item=item)
            for piece in pieces:
                yield event(
                    "response.function_call_arguments.delta", **place, delta=piece, obfuscation="Zp"
                )
            arguments = "".join(pieces)
            yield event("response.function_call_arguments.done", **place, arguments=arguments)
            item = self._call_item(number_of_call, name, arguments, "completed")
            yield event("response.output_item.done", output_index=index, item=item)
            index += 1
        yield event("response.completed", response=self.response("completed", self.output()))

    def _reasoning_item(self, text: str) -> dict[str, Any]:
        return {
            "id": f"rs_{self._ids[0]}",
            "type": "reasoning",
            "encrypted_content": f"gAAAAfake{self._ids[0]}",
            "summary": [{"type": "summary_text", "text": text}],
        }

    def _message_item(self, text: str | None, status: str) -> dict[str, Any]:
        content = (
            []
            if text is None
            else [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]
        )
        return {
            "id": f"msg_{self._ids[1]}",
            "type": "message",
            "status": status,
            "content": content,
            "role": "assistant",
        }

    def _call_item(self, index: int, name: str, arguments: str, status: str) -> dict[str, Any]:
        call_id = self._call_ids[index % len(self._call_ids)] + (f"_{index}" if index >= 8 else "")
        return {
            "id": f"fc_{call_id.removeprefix('call_')}",
            "type": "function_call",
            "status": status,
            "arguments": arguments,
            "call_id": call_id,
            "name": name,
        }

    def _usage(self) -> dict[str, Any]:
        sent = len(json.dumps([self.request.get("instructions"), self.request.get("input")]))
        output = len(self.reasoning) + len(self.texts) + sum(len(p) for _, p in self.calls)
        return {
            "input_tokens": max(1, sent // 4),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": len(self.reasoning)},
            "total_tokens": max(1, sent // 4) + output,
        }


def _input_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "input_text"
        )
    return ""


def _last_input_text(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        if item.get("role") == "user":
            return _input_text(item)
    return ""


def _trailing_outputs(items: list[dict[str, Any]]) -> list[str]:
    """The texts of the `function_call_output` items the input ends with."""
    outputs: list[str] = []
    for item in reversed(items):
        if item.get("type") != "function_call_output":
            break
        output = item.get("output")
        if isinstance(output, list):
            output = "\n".join(
                str(part.get("text", "")) for part in output if isinstance(part, dict)
            )
        outputs.insert(0, str(output or ""))
    return outputs


def _input_problem(items: Any) -> str | None:
    """What the Responses API would reject in this input, or None."""
    if not isinstance(items, list) or not items:
        return "Invalid 'input': expected a non-empty array of input items."
    calls: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            return f"Invalid type for 'input[{index}]': expected an object."
        kind = item.get("type", "message")
        if kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output" and item.get("call_id") not in calls:
            return (
                f"No tool call found for function call output with call_id {item.get('call_id')}."
            )
        elif kind == "message" and item.get("role") not in (
            "user",
            "assistant",
            "system",
            "developer",
        ):
            return f"Invalid value: '{item.get('role')}'. Supported values are: 'user', ..."
    return None


def _error_body(
    message: str, kind: str, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _words(text: str) -> list[str]:
    """Word-sized deltas that join back to `text` exactly."""
    pieces = re.findall(r"\s*\S+", text)
    trailing = text[len("".join(pieces)) :]
    if trailing:
        pieces.append(trailing)
    return pieces or [text]


# --- CLI ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    return run_cli(
        argv,
        "Fake OpenAI-compatible server; prints its base URL, serves until killed.",
        lambda args: FakeLLM(args.host, args.port, verbose=args.verbose),
    )


if __name__ == "__main__":
    sys.exit(main())
