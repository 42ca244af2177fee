"""The offline echo provider: echoes, scripted tool calls, stops and pacing."""

from __future__ import annotations

import math

import anyio
import pytest

from acp_agent.config import EchoProviderConfig
from acp_agent.messages import (
    ImagePart,
    Message,
    Stop,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallArgsDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    ToolResultPart,
    Usage,
)
from acp_agent.providers import ModelRequest, ProviderError
from acp_agent.providers.echo import EchoProvider

pytestmark = pytest.mark.anyio


def make_provider(chunk_delay: float = 0.0) -> EchoProvider:
    return EchoProvider("echo", EchoProviderConfig(type="echo", chunk_delay=chunk_delay))


def request(*messages: Message, system: str = "") -> ModelRequest:
    return ModelRequest(model="echo", system=system, messages=messages)


def user(*parts: TextPart | ImagePart | str) -> Message:
    return Message("user", [TextPart(part) if isinstance(part, str) else part for part in parts])


async def collect(req: ModelRequest, provider: EchoProvider | None = None) -> list[StreamEvent]:
    async with (provider or make_provider()).stream(req) as events:
        return [event async for event in events]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def test_user_text_is_echoed_word_by_word_then_usage_and_end_turn() -> None:
    events = await collect(request(user("hello  wide\nworld")))

    assert events[:4] == [
        TextDelta("Echo: "),
        TextDelta("hello  "),
        TextDelta("wide\n"),
        TextDelta("world"),
    ]
    assert isinstance(events[4], Usage)
    assert events[5:] == [Stop("end_turn")]


async def test_usage_estimates_a_token_per_four_characters() -> None:
    events = await collect(request(user("twelve chars"), system="sys"))

    usage = next(event for event in events if isinstance(event, Usage))
    assert usage == Usage(
        input_tokens=math.ceil(len("sys" + "twelve chars") / 4),
        output_tokens=math.ceil(len("Echo: twelve chars") / 4),
    )


async def test_an_image_in_the_prompt_is_mentioned() -> None:
    events = await collect(request(user("look", ImagePart("iVBORw0KGgo=", "image/png"))))

    assert text_of(events) == "Echo: look\n[image: image/png]"


async def test_a_tool_line_becomes_a_scripted_tool_call() -> None:
    events = await collect(request(user('please\n@tool read_file {"path": "README.md"}')))

    assert events[:3] == [
        ToolCallStart("echo-call-1", "read_file"),
        ToolCallArgsDelta("echo-call-1", '{"path": "README.md"}'),
        ToolCallEnd(ToolCallPart("echo-call-1", "read_file", {"path": "README.md"})),
    ]
    assert isinstance(events[3], Usage)
    assert events[4:] == [Stop("tool_use")]
    assert text_of(events) == ""


async def test_tool_call_ids_stay_unique_within_the_conversation() -> None:
    history = [
        user("@tool read_file {}"),
        Message("assistant", [ToolCallPart("echo-call-1", "read_file", {})]),
        Message("tool", [ToolResultPart("echo-call-1", (TextPart("x"),))]),
        user('@tool read_file {"path": "a"}\n@tool grep {"pattern": "b"}'),
    ]

    events = await collect(request(*history))

    starts = [event for event in events if isinstance(event, ToolCallStart)]
    assert starts == [
        ToolCallStart("echo-call-2", "read_file"),
        ToolCallStart("echo-call-3", "grep"),
    ]


async def test_a_tool_line_with_broken_json_is_echoed_instead_of_called() -> None:
    events = await collect(request(user('@tool read_file {"path": ')))

    assert text_of(events) == 'Echo: @tool read_file {"path":'
    assert events[-1] == Stop("end_turn")


@pytest.mark.parametrize("reason", ["max_tokens", "refusal"])
async def test_a_stop_line_ends_the_reply_with_that_reason(reason: str) -> None:
    events = await collect(request(user(f"partial answer\n@stop {reason}")))

    assert text_of(events) == "Echo: partial answer"
    assert events[-1] == Stop(reason)  # type: ignore[arg-type]


async def test_tool_results_are_reported_with_the_tool_name() -> None:
    long_output = "\n".join(f"line {n}" for n in range(1, 31))
    history = [
        user('@tool read_file {"path": "a"}\n@tool shell {"command": "false"}'),
        Message(
            "assistant",
            [
                ToolCallPart("echo-call-1", "read_file", {"path": "a"}),
                ToolCallPart("echo-call-2", "shell", {"command": "false"}),
            ],
        ),
        Message(
            "tool",
            [
                ToolResultPart("echo-call-1", (TextPart(long_output),)),
                ToolResultPart("echo-call-2", (TextPart("exit code 1"),), is_error=True),
            ],
        ),
    ]

    events = await collect(request(*history))

    first_20 = "\n".join(f"line {n}" for n in range(1, 21))
    assert text_of(events) == (
        f"Tool read_file returned:\n{first_20}\n... (10 more lines)\n\n"
        "Tool shell failed: exit code 1"
    )
    assert events[-1] == Stop("end_turn")


async def test_a_conversation_ending_with_the_assistant_is_an_error() -> None:
    with pytest.raises(ProviderError, match="must end with a user message"):
        await collect(request(user("hi"), Message("assistant", [TextPart("hello")])))


async def test_chunk_delay_paces_the_words() -> None:
    start = anyio.current_time()

    await collect(request(user("one two three")), make_provider(chunk_delay=0.02))

    assert anyio.current_time() - start >= 3 * 0.02


async def test_a_slow_line_makes_the_stream_cancellable_mid_reply() -> None:
    seen: list[StreamEvent] = []

    with anyio.fail_after(2), anyio.move_on_after(0.1) as scope:
        async with make_provider().stream(request(user("@slow 30\nmany words here"))) as events:
            async for event in events:
                seen.append(event)

    assert scope.cancelled_caught
    assert seen == [TextDelta("Echo: ")]
