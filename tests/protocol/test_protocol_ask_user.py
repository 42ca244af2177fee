"""ask_user over the wire, in-process: the model (the fake OpenAI server, `[[tool ...]]`)
asks, the editor (`FakeClient`) answers `elicitation/create`; the tool is offered only to a
client that advertised form elicitation.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from acp.schema import CreateFormSessionElicitationRequest
from fake_acp_client import ZED_CLIENT_CAPABILITIES, ZED_INITIALIZE, FakeClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fake_llm import FakeLLM

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

SCHEMA = Path(__file__).parent / "fixtures" / "auth-elicitation.schema.json"
ELICITING_INITIALIZE: dict[str, Any] = {
    **ZED_INITIALIZE,
    "clientCapabilities": {**copy.deepcopy(ZED_CLIENT_CAPABILITIES), "elicitation": {"form": {}}},
}
"""Zed's handshake plus form elicitation."""
URL_ONLY_INITIALIZE: dict[str, Any] = {
    **ZED_INITIALIZE,
    "clientCapabilities": {**copy.deepcopy(ZED_CLIENT_CAPABILITIES), "elicitation": {"url": {}}},
}
QUESTION = {"question": "Which database?", "choices": ["Postgres", "SQLite"]}
ASK = f"Pick one [[tool ask_user {json.dumps(QUESTION)}]]"


@cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return schema


def assert_schema(definition: str, value: Any) -> None:
    jsonschema.validate(value, {"$ref": f"#/$defs/{definition}", "$defs": _schema()["$defs"]})


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def config(tmp_path: Path, fake_llm: FakeLLM) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{fake_llm.base_url}"\n'
        '[[providers.fake.models]]\nid = "fake-model"\n',
        encoding="utf-8",
    )
    return str(path)


def answer_with(client: FakeClient, result: dict[str, Any]) -> None:
    async def answer(request: dict[str, Any]) -> None:
        await client.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    client.answer_overrides["elicitation/create"] = answer


def offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def tool_updates(client: FakeClient, session_id: str) -> list[dict[str, Any]]:
    return [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]


async def start(client: FakeClient, cwd: Path, initialize: dict[str, Any]) -> str:
    await client.initialize(initialize)
    return await client.new_session(cwd)


# --- with form elicitation -------------------------------------------------------------------


async def test_the_question_goes_to_the_editor_and_the_answer_to_the_model(
    connection: Connection, config: str, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async with connection(config) as client:
        answer_with(client, {"action": "accept", "content": {"choice": "SQLite"}})
        session_id = await start(client, tmp_path, ELICITING_INITIALIZE)
        reply = await client.prompt(session_id, ASK)

    assert reply["result"]["stopReason"] == "end_turn"
    first, second = fake_llm.requests
    assert "ask_user" in offered(first)
    [asked] = client.agent_requests_for("elicitation/create")
    assert_schema("CreateElicitationRequest", asked)
    request = CreateFormSessionElicitationRequest.model_validate(asked)
    assert request.session_id == session_id
    assert request.message == "Which database?"
    assert asked["requestedSchema"] == {
        "type": "object",
        "properties": {
            "choice": {"type": "string", "title": "Choice", "enum": ["Postgres", "SQLite"]}
        },
        "required": ["choice"],
    }
    [started, *_] = tool_updates(client, session_id)
    assert started["title"] == "Ask: Which database?"
    assert asked["toolCallId"] == started["toolCallId"]
    assert tool_messages(second) == ['The user answered: {"choice": "SQLite"}']
    finished = tool_updates(client, session_id)[-1]
    assert finished["status"] == "completed"
    assert finished["content"][0]["content"]["text"] == "Choice: SQLite"


async def test_a_decline_is_heard_by_the_model_and_the_turn_goes_on(
    connection: Connection, config: str, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async with connection(config) as client:
        answer_with(client, {"action": "decline"})
        session_id = await start(client, tmp_path, ELICITING_INITIALIZE)
        reply = await client.prompt(session_id, ASK)

    assert_schema("CreateElicitationResponse", {"action": "decline"})
    assert reply["result"]["stopReason"] == "end_turn"
    [message] = tool_messages(fake_llm.requests[-1])
    assert message.startswith("The user declined to answer.")


async def test_a_cancel_ends_the_turn_cancelled_and_the_model_hears_it_next_time(
    connection: Connection, config: str, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    async with connection(config) as client:
        answer_with(client, {"action": "cancel"})
        session_id = await start(client, tmp_path, ELICITING_INITIALIZE)
        reply = await client.prompt(session_id, ASK)
        asked_after_cancel = len(fake_llm.requests)
        after = await client.prompt(session_id, "go on")

    assert reply["result"]["stopReason"] == "cancelled"
    assert asked_after_cancel == 1, "the model is not asked again in a cancelled turn"
    failed = tool_updates(client, session_id)[-1]
    assert failed["status"] == "failed"
    assert failed["content"][0]["content"]["text"] == "The user dismissed the question."
    assert after["result"]["stopReason"] == "end_turn"
    [heard] = tool_messages(fake_llm.requests[-1])
    assert heard.endswith("The user cancelled this tool call.")  # as an error result


async def test_a_session_cancel_withdraws_the_open_question(
    connection: Connection, config: str, tmp_path: Path
) -> None:
    asked = anyio.Event()

    async def never_answer(request: dict[str, Any]) -> None:
        asked.set()

    async with connection(config) as client:
        client.answer_overrides["elicitation/create"] = never_answer
        session_id = await start(client, tmp_path, ELICITING_INITIALIZE)
        prompt_id = await client.start_prompt(session_id, ASK)
        with anyio.fail_after(10):
            await asked.wait()
        await client.notify("session/cancel", {"sessionId": session_id})
        reply = await client.reply(prompt_id)
        [request] = [r for r in client.agent_requests if r["method"] == "elicitation/create"]
        await client.wait_for(
            lambda f: (
                f.get("method") == "$/cancel_request"
                and f["params"].get("requestId") == request["id"]
            )
        )

    assert reply["result"]["stopReason"] == "cancelled"


# --- without it ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "initialize", [ZED_INITIALIZE, URL_ONLY_INITIALIZE], ids=["zed", "url elicitation only"]
)
async def test_without_form_elicitation_the_model_is_not_offered_the_tool(
    connection: Connection,
    config: str,
    fake_llm: FakeLLM,
    tmp_path: Path,
    initialize: dict[str, Any],
) -> None:
    async with connection(config) as client:
        session_id = await start(client, tmp_path, initialize)
        reply = await client.prompt(session_id, ASK)

    assert reply["result"]["stopReason"] == "end_turn"
    first, second = fake_llm.requests
    assert "ask_user" not in offered(first)
    assert "read_file" in offered(first)
    assert client.agent_requests_for("elicitation/create") == []
    [message] = tool_messages(second)
    assert "There is no tool named 'ask_user'" in message
