"""The providers against the fake servers the benchmarks drive: every API family streams
every kind of `[[deltas N KIND]]` (text, thinking, one tool call's arguments), and the
fakes stamp when a request arrived and when its answer began."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_anthropic import FakeAnthropic
from fake_llm import FakeLLM

from acp_agent.config import AnthropicProviderConfig, ModelConfig, OpenAIProviderConfig
from acp_agent.messages import (
    Message,
    Stop,
    StreamEvent,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ToolCallEnd,
    ToolResultPart,
)
from acp_agent.providers import ModelRequest, Provider, create_provider

pytestmark = pytest.mark.anyio

DELTAS = 50
WORDS = "".join(f"w{i} " for i in range(DELTAS))


def openai_provider(fake: FakeLLM) -> Provider:
    models = (ModelConfig(id="chat-model"), ModelConfig(id="responses-model", api="responses"))
    config = OpenAIProviderConfig(type="openai", base_url=fake.base_url, models=models)
    return create_provider("fake", config, {"OPENAI_API_KEY": "bench-key"})


def anthropic_provider(fake: FakeAnthropic) -> Provider:
    config = AnthropicProviderConfig(
        type="anthropic", base_url=fake.base_url, models=(ModelConfig(id="claude"),)
    )
    return create_provider("claude", config, {"ANTHROPIC_API_KEY": "bench-key"})


@asynccontextmanager
async def closing(provider: Provider) -> AsyncIterator[Provider]:
    """The provider, its HTTP client closed on the way out: a client left for the garbage
    collector closes its sockets on whatever event loop runs then (a later test's)."""
    try:
        yield provider
    finally:
        await provider.aclose()


async def stream(provider: Provider, model: str, messages: list[Message]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    async with provider.stream(ModelRequest(model, "Be brief.", messages)) as found:
        async for event in found:
            events.append(event)
    return events


async def check_kinds(provider: Provider, model: str) -> None:
    prompt = [Message("user", [TextPart(f"[[deltas {DELTAS}]]")])]
    events = await stream(provider, model, prompt)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == WORDS
    assert events[-1] == Stop("end_turn")

    prompt = [Message("user", [TextPart(f"[[deltas {DELTAS} thinking]]")])]
    events = await stream(provider, model, prompt)
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == WORDS
    assert not [e for e in events if isinstance(e, TextDelta)]

    prompt = [Message("user", [TextPart(f"[[deltas {DELTAS} tool]]")])]
    events = await stream(provider, model, prompt)
    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert (end.call.name, end.call.arguments) == ("deltas_args", {"words": WORDS})
    assert events[-1] == Stop("tool_use")

    answered = [
        *prompt,
        Message("assistant", [end.call]),
        Message("tool", [ToolResultPart(end.call.id, (TextPart("done"),))]),
    ]
    events = await stream(provider, model, answered)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Tool result: done"


@pytest.mark.parametrize("model", ["chat-model", "responses-model"])
async def test_the_openai_fake_streams_every_kind_for_both_apis(model: str) -> None:
    with FakeLLM() as fake:
        async with closing(openai_provider(fake)) as provider:
            await check_kinds(provider, model)
        paths = {exchange.path for exchange in fake.exchanges}
        assert paths == {"/v1/responses" if model == "responses-model" else "/v1/chat/completions"}


async def test_the_anthropic_fake_streams_every_kind() -> None:
    with FakeAnthropic() as fake:
        async with closing(anthropic_provider(fake)) as provider:
            await check_kinds(provider, "claude")


async def test_the_fakes_stamp_arrival_and_first_byte_and_report_each_exchange() -> None:
    finished: list[Any] = []
    with FakeLLM() as fake:
        fake.on_finish = finished.append
        async with closing(openai_provider(fake)) as provider:
            await stream(provider, "chat-model", [Message("user", [TextPart("hi")])])

    (exchange,) = finished
    assert exchange.outcome == "completed"
    assert exchange.received is not None and exchange.first_byte is not None
    assert exchange.received <= exchange.first_byte <= (exchange.ended or 0)
