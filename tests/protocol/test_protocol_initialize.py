from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from acp.schema import InitializeResponse
from fake_acp_client import ZED_INITIALIZE

pytestmark = pytest.mark.anyio

Connection = Callable[[], Any]


async def test_zeds_handshake_is_answered_with_version_1_and_a_schema_valid_response(
    connection: Connection,
) -> None:
    async with connection() as client:
        reply = await client.request("initialize", copy.deepcopy(ZED_INITIALIZE))
    assert reply["jsonrpc"] == "2.0"
    result = reply["result"]
    assert result["protocolVersion"] == 1
    assert result["agentInfo"]["name"] == "acp-agent"
    InitializeResponse.model_validate(result)


async def test_the_initialize_response_has_no_nulls(connection: Connection) -> None:
    async with connection() as client:
        result = await client.initialize()

    def nulls(value: Any, path: str = "") -> list[str]:
        if value is None:
            return [path]
        if isinstance(value, dict):
            return [p for k, v in value.items() for p in nulls(v, f"{path}.{k}")]
        if isinstance(value, list):
            return [p for i, v in enumerate(value) for p in nulls(v, f"{path}[{i}]")]
        return []

    assert nulls(result) == []


@pytest.mark.parametrize("asked", [2, 99])
async def test_a_client_asking_a_newer_version_is_answered_version_2_our_latest(
    connection: Connection, asked: int
) -> None:
    # ACP-INIT-003: never the echo of an unsupported version; v2 shapes: `test_dialect`.
    async with connection() as client:
        result = await client.initialize({**ZED_INITIALIZE, "protocolVersion": asked})
    assert result["protocolVersion"] == 2


async def test_a_client_asking_an_older_version_is_answered_version_1(
    connection: Connection,
) -> None:
    async with connection() as client:
        result = await client.initialize({**ZED_INITIALIZE, "protocolVersion": 0})
    assert result["protocolVersion"] == 1
    InitializeResponse.model_validate(result)


async def test_an_older_v1_initialize_without_client_capabilities_works(
    connection: Connection, tmp_path: Any
) -> None:
    async with connection() as client:
        result = await client.initialize({"protocolVersion": 1})
        InitializeResponse.model_validate(result)
        assert result["protocolVersion"] == 1
        # Older clients reject auth method types they do not know: only untyped entries.
        assert all(method.get("type", "agent") == "agent" for method in result["authMethods"])
        session_id = await client.new_session(tmp_path)
        reply = await client.prompt(session_id, "hi")
    assert reply["result"] == {"stopReason": "end_turn"}


@pytest.mark.parametrize(
    "params", [{"protocolVersion": 1}, ZED_INITIALIZE], ids=["old client", "zed"]
)
async def test_auth_methods_name_the_openai_api_key_variable(
    connection: Connection, params: dict[str, Any]
) -> None:
    async with connection() as client:
        result = await client.initialize(params)
    assert result["authMethods"]
    assert "OPENAI_API_KEY" in json.dumps(result["authMethods"])


async def test_a_client_with_terminal_auth_gets_a_terminal_login_method(
    connection: Connection,
) -> None:
    async with connection() as client:
        result = await client.initialize()
    [login] = [m for m in result["authMethods"] if m.get("type") == "terminal"]
    assert login["args"] == ["login"]
    # `env_var` is not in the stable schema: never offered (tests/protocol/test_protocol_auth.py).
    assert not [m for m in result["authMethods"] if m.get("type") == "env_var"]


@pytest.mark.parametrize("params", [None, [], [1], "x", 1, True])
async def test_initialize_params_that_are_not_an_object_are_invalid_params(
    connection: Connection, params: Any
) -> None:
    async with connection() as client:
        reply = await client.request("initialize", params)  # None: no params at all
        assert reply["error"]["code"] == -32602
        assert (await client.initialize())["protocolVersion"] == 1


@pytest.mark.parametrize("version", ["1", 1.0, 1.5, None, True, [1], {"major": 1}])
async def test_a_non_integer_protocol_version_is_invalid_params(
    connection: Connection, version: Any
) -> None:
    async with connection() as client:
        error = await client.error("initialize", {**ZED_INITIALIZE, "protocolVersion": version})
        assert error["code"] == -32602
        assert "protocolVersion" in error["message"]
        assert (await client.initialize())["protocolVersion"] == 1


async def test_a_missing_protocol_version_is_invalid_params(connection: Connection) -> None:
    params = {k: v for k, v in ZED_INITIALIZE.items() if k != "protocolVersion"}
    async with connection() as client:
        error = await client.error("initialize", params)
    assert error["code"] == -32602
    assert "protocolVersion" in error["message"]


async def test_unknown_fields_and_meta_in_initialize_are_accepted(connection: Connection) -> None:
    params = {
        **ZED_INITIALIZE,
        "_meta": {"vendor": {"x": 1}},
        "someFutureField": [1, 2],
        "clientCapabilities": {
            **ZED_INITIALIZE["clientCapabilities"],
            "fs": {"readTextFile": True, "futureFs": True, "_meta": {}},
            "somethingNew": {"nested": True},
        },
    }
    async with connection() as client:
        result = await client.initialize(params)
    assert result["protocolVersion"] == 1
    InitializeResponse.model_validate(result)


async def test_capabilities_of_the_wrong_type_read_as_not_supported(
    connection: Connection, tmp_path: Any
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    params = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": "yes"}}}
    async with connection() as client:
        await client.initialize(params)
        session_id = await client.new_session(tmp_path)
        reply = await client.prompt(session_id, '@tool read_file {"path": "a.txt"}')
        assert reply["result"]["stopReason"] == "end_turn"
        assert client.agent_requests_for("fs/read_text_file") == []
