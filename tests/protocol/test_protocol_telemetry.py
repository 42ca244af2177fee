"""Traces of a prompt, as an OpenTelemetry backend receives them: one `invoke_agent` span per
turn, a `chat` span per model request (each retry its own) and an `execute_tool` span per
tool call, both children of the turn's, with the GenAI semantic conventions' attributes.

The agent is served in-process (the tracer provider is handed over with
`telemetry.configure`, as a program embedding the agent would) and spans are read from
OpenTelemetry's in-memory exporter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import ZED_INITIALIZE
from fake_llm import FakeLLM
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from acp_agent import telemetry

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(provider)
    yield exporter
    telemetry.configure(None)
    provider.shutdown()


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def config_for(tmp_path: Path, fake: FakeLLM) -> str:
    config = tmp_path / "agent.toml"
    config.write_text(
        f"""default_model = "fake/fake-model"

[providers.fake]
type = "openai-compatible"
base_url = "{fake.base_url}"
api_key = "sk-test-telemetry"
models = [{{ id = "fake-model" }}]

[providers.fake.retry]
initial_delay = 0.01
""",
        encoding="utf-8",
    )
    return str(config)


async def prompt_once(connection: Connection, config: str, cwd: Path, text: str) -> str:
    async with connection(config) as client:
        await client.initialize(ZED_INITIALIZE)
        session_id: str = await client.new_session(cwd)
        reply = await client.prompt(session_id, text)
    assert reply["result"] == {"stopReason": "end_turn"}, reply
    return session_id


def named(spans: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [span for span in spans.get_finished_spans() if span.name.startswith(prefix)]


async def test_a_turn_with_a_tool_call_is_one_trace_of_turn_requests_and_tool(
    connection: Connection, tmp_path: Path, fake: FakeLLM, spans: InMemorySpanExporter
) -> None:
    (tmp_path / "notes.txt").write_text("some notes\n", encoding="utf-8")
    config = config_for(tmp_path, fake)

    session_id = await prompt_once(
        connection, config, tmp_path, 'read [[tool read_file {"path": "notes.txt"}]]'
    )

    (turn,) = named(spans, "invoke_agent")
    assert turn.name == "invoke_agent acp-agent"
    assert dict(turn.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "acp-agent",
        "gen_ai.conversation.id": session_id,
        "acp_agent.stop_reason": "end_turn",
    }
    requests = named(spans, "chat ")
    assert [span.name for span in requests] == ["chat fake-model", "chat fake-model"]
    for request, finish in zip(requests, ["tool_use", "end_turn"], strict=True):
        attributes = request.attributes or {}
        assert request.kind is SpanKind.CLIENT
        assert request.parent is not None and request.parent.span_id == turn.context.span_id
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai-compatible"
        assert attributes["gen_ai.request.model"] == "fake-model"
        assert attributes["gen_ai.response.finish_reasons"] == (finish,)
        assert isinstance(attributes["gen_ai.usage.input_tokens"], int)
        assert isinstance(attributes["gen_ai.usage.output_tokens"], int)
    (tool,) = named(spans, "execute_tool")
    assert tool.name == "execute_tool read_file"
    assert tool.parent is not None and tool.parent.span_id == turn.context.span_id
    assert (tool.attributes or {})["gen_ai.tool.name"] == "read_file"
    assert (tool.attributes or {})["gen_ai.tool.type"] == "function"
    assert tool.status.status_code is StatusCode.UNSET
    assert {span.context.trace_id for span in spans.get_finished_spans()} == {turn.context.trace_id}


async def test_a_retried_request_and_a_failed_tool_call_are_marked_as_errors(
    connection: Connection, tmp_path: Path, fake: FakeLLM, spans: InMemorySpanExporter
) -> None:
    config = config_for(tmp_path, fake)

    await prompt_once(
        connection,
        config,
        tmp_path,
        'read [[status 500 1]] [[tool read_file {"path": "missing.txt"}]]',
    )

    failed, *answered = named(spans, "chat ")
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "500"
    assert (failed.attributes or {})["acp_agent.attempt"] == 1
    assert [(span.attributes or {}).get("error.type") for span in answered] == [None, None]
    (tool,) = named(spans, "execute_tool")
    assert tool.status.status_code is StatusCode.ERROR
    assert (tool.attributes or {})["error.type"] == "tool_error"
