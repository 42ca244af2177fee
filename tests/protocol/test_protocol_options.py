"""Per-session choices over the wire: config options, legacy models, /model, commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp.schema import NewSessionResponse, SessionNotification, SetSessionConfigOptionResponse
from fake_acp_client import FakeClient

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

TWO_PROVIDERS = """
default_model = "fast/echo"

[providers.fast]
type = "echo"
models = [{ id = "echo", name = "Fast echo" }]

[providers.deep]
type = "echo"
models = [{ id = "thinker", reasoning = true, thought_level = "low", context_window = 200000 }]
"""


@pytest.fixture
def config_file(tmp_path: Path) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(TWO_PROVIDERS)
    return str(path)


def option(options: list[dict[str, Any]], option_id: str) -> dict[str, Any] | None:
    return next((o for o in options if o["id"] == option_id), None)


def set_option(session_id: str, config_id: str, value: str) -> dict[str, Any]:
    return {"sessionId": session_id, "configId": config_id, "value": value}


async def new_session(client: FakeClient, cwd: Path) -> dict[str, Any]:
    await client.initialize()
    result: dict[str, Any] = await client.call("session/new", {"cwd": str(cwd), "mcpServers": []})
    return result


async def test_new_session_offers_every_configured_model_grouped_by_provider(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        result = await new_session(client, tmp_path)
    NewSessionResponse.model_validate(result)
    model = option(result["configOptions"], "model")
    assert model is not None
    assert model["category"] == "model"
    assert model["currentValue"] == "fast/echo"
    groups = {g["group"]: [o["value"] for o in g["options"]] for g in model["options"]}
    assert groups == {"fast": ["fast/echo"], "deep": ["deep/thinker"]}
    assert model["options"][0]["options"][0]["name"] == "Fast echo"
    # A non-reasoning model has no thinking option; older clients get the `models` state.
    assert option(result["configOptions"], "thought_level") is None
    assert result["models"]["currentModelId"] == "fast/echo"
    assert [m["modelId"] for m in result["models"]["availableModels"]] == [
        "fast/echo",
        "deep/thinker",
    ]


async def test_choosing_a_reasoning_model_adds_the_thinking_option_with_its_default(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = (await new_session(client, tmp_path))["sessionId"]
        result = await client.call(
            "session/set_config_option", set_option(session_id, "model", "deep/thinker")
        )
        SetSessionConfigOptionResponse.model_validate(result)
        thinking = option(result["configOptions"], "thought_level")
        assert thinking is not None and thinking["currentValue"] == "low"
        result = await client.call(
            "session/set_config_option", set_option(session_id, "thought_level", "high")
        )
    thinking = option(result["configOptions"], "thought_level")
    assert thinking is not None and thinking["currentValue"] == "high"
    assert option(result["configOptions"], "model")["currentValue"] == "deep/thinker"  # type: ignore[index]


async def test_unknown_models_options_and_levels_are_invalid_params_and_change_nothing(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = (await new_session(client, tmp_path))["sessionId"]
        unknown_model = await client.error(
            "session/set_config_option", set_option(session_id, "model", "nope/x")
        )
        unknown_option = await client.error(
            "session/set_config_option", set_option(session_id, "colour", "red")
        )
        no_thinking = await client.error(
            "session/set_config_option", set_option(session_id, "thought_level", "high")
        )
        reply = await client.prompt(session_id, "still here")
    assert unknown_model["code"] == -32602 and "nope/x" in unknown_model["message"]
    assert "fast/echo" in unknown_model["message"]  # names what can be chosen
    assert unknown_option["code"] == -32602 and "colour" in unknown_option["message"]
    assert no_thinking["code"] == -32602
    assert reply["result"]["stopReason"] == "end_turn"


async def test_legacy_set_model_switches_and_announces_the_new_options(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = (await new_session(client, tmp_path))["sessionId"]
        result = await client.call(
            "session/set_model", {"sessionId": session_id, "modelId": "deep/thinker"}
        )
        await client.wait_for(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "config_option_update"
            )
        )
    assert result == {}
    update = next(
        u for u in client.updates(session_id) if u["sessionUpdate"] == "config_option_update"
    )
    SessionNotification.model_validate({"sessionId": session_id, "update": update})
    assert option(update["configOptions"], "model")["currentValue"] == "deep/thinker"  # type: ignore[index]


async def test_the_model_command_is_advertised_after_the_session_exists_and_switches_models(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = (await new_session(client, tmp_path))["sessionId"]
        commands = await client.wait_for(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "available_commands_update"
            )
        )
        listing = await client.prompt(session_id, "/model")
        switched = await client.prompt(session_id, "/model deep/thinker")
        options = await client.call(
            "session/set_config_option", set_option(session_id, "thought_level", "medium")
        )
    # Sent after the session/new answer, so the client already knows the session id.
    answer_index = client.index_of(lambda f: f.get("result", {}).get("sessionId") == session_id)
    assert client.frames.index(commands) > answer_index
    names = [c["name"] for c in commands["params"]["update"]["availableCommands"]]
    assert names[:4] == ["model", "mode", "think", "mcp"]
    assert listing["result"]["stopReason"] == "end_turn"
    assert switched["result"]["stopReason"] == "end_turn"
    text = "".join(
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "deep/thinker" in text and "fast/echo  (current)" in text
    assert "Model set to deep/thinker." in text
    assert option(options["configOptions"], "model")["currentValue"] == "deep/thinker"  # type: ignore[index]


async def test_a_burst_of_deltas_reaches_the_client_as_fewer_chunks_with_all_the_text(
    connection: Connection, tmp_path: Path
) -> None:
    words = " ".join(f"w{i}" for i in range(400))
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        reply = await client.prompt(session_id, words)
    chunks = [
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert reply["result"]["stopReason"] == "end_turn"
    assert "".join(chunks) == f"Echo: {words}"
    assert chunks[0] == "Echo: "  # the first delta is not held back
    assert len(chunks) < 50  # 401 deltas, coalesced per frame
