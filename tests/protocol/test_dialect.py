"""ACP v2 negotiated per connection: `initialize` with `protocolVersion: 2` (or any later
version) speaks v2 for the rest of the connection; 1 and below stay v1.

Every v2 frame checked here is validated against the v2 schemas the npm
`@agentclientprotocol/sdk` ships (`schema.unstable.json`, the superset we speak, and the
stable `schema.json` where the frame is stable). The v1 tests elsewhere hold v1 unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from schema_support import assert_v2, schema_document

from acp_agent.protocol.dialect import V1, V2, dialect_for, initialize_response, negotiate
from acp_agent.protocol.methods import REQUESTS_V2
from acp_agent.rpc.errors import RpcError

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

METHOD_NOT_FOUND = -32601

V2_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 2,
    "info": {"name": "v2-test", "version": "1.0.0"},
    "capabilities": {"auth": {"terminal": {}}, "elicitation": {"form": {}}},
}


def _schema(name: str) -> dict[str, Any]:
    """The v2 schema file `name` as JSON."""
    return schema_document("v2", name)


def agent_methods() -> set[str]:
    """The methods the v2 (unstable) schema has a client send to the agent."""
    return {
        spec["x-method"]
        for spec in _schema("schema.unstable.json")["$defs"].values()
        if isinstance(spec, dict) and spec.get("x-side") == "agent" and "x-method" in spec
    }


# --- negotiation -----------------------------------------------------------------------


@pytest.mark.parametrize(("requested", "spoken"), [(2, 2), (3, 2), (65535, 2), (1, 1), (0, 1)])
def test_the_requested_version_chooses_the_dialect_and_the_answered_version(
    requested: int, spoken: int
) -> None:
    # The conformance kit's ACP-INIT-003 probe (65535) carries v2's `info` and v1's fields.
    params = {**V2_INITIALIZE, "protocolVersion": requested, "clientCapabilities": {}}
    handshake = negotiate(params)

    assert dialect_for(handshake).version == spoken
    assert initialize_response(handshake)["protocolVersion"] == spoken


@pytest.mark.parametrize("params", [None, [], {"protocolVersion": "2"}, {"protocolVersion": True}])
def test_unreadable_initialize_params_are_invalid_params(params: Any) -> None:
    with pytest.raises(RpcError) as raised:
        negotiate(params)
    assert raised.value.code == -32602


def test_a_v2_client_is_read_from_info_and_capabilities_with_objects_as_support() -> None:
    handshake = negotiate(
        {
            **V2_INITIALIZE,
            "capabilities": {"auth": {"terminal": True}, "elicitation": {"url": {}}},
            # v1 fields in a v2 request mean nothing there.
            "clientCapabilities": {"fs": {"readTextFile": True}, "terminal": True},
        }
    )

    client = handshake.client
    assert handshake.client_name == "v2-test"
    assert (client.auth_terminal, client.elicitation_form, client.elicitation_url) == (
        False,  # a boolean is not a support marker in v2
        False,
        True,
    )
    assert not (client.read_text_file or client.write_text_file or client.terminal)
    # What v2 has every client understand, with no capability to ask for.
    assert client.plan and client.subagents and client.session_notices


def test_the_v2_initialize_answer_validates_against_the_v2_schema() -> None:
    answer = initialize_response(negotiate(V2_INITIALIZE))

    assert_v2(answer, "InitializeResponse")
    assert answer["info"]["name"] == "acp-agent" and answer["info"]["title"]
    assert "agentInfo" not in answer and "agentCapabilities" not in answer
    session = answer["capabilities"]["session"]
    assert set(session) == {
        "prompt",
        "mcp",
        "delete",
        "additionalDirectories",
        "fork",
        "title",
        "archive",
        "status",
        "systemPrompt",
    }
    assert "sse" not in session["mcp"]
    assert session["mcp"]["acp"] == {}  # MCP over ACP is routed


def test_v2_auth_methods_carry_method_id_and_type_and_terminal_login_only_when_asked() -> None:
    with_terminal = initialize_response(negotiate(V2_INITIALIZE))["authMethods"]
    without = initialize_response(negotiate({**V2_INITIALIZE, "capabilities": {}}))["authMethods"]

    assert [(m["type"], m["methodId"]) for m in with_terminal] == [
        ("agent", "acp-agent-config"),
        ("terminal", "acp-agent-login"),
    ]
    assert with_terminal[1]["args"] == ["login"]
    assert [m["type"] for m in without] == ["agent"]
    for method in with_terminal:
        assert_v2(method, "AuthMethod")


def test_the_v2_method_table_is_in_the_v2_schema_and_has_no_v1_only_method() -> None:
    routed = set(REQUESTS_V2) | {V2.login_method, "initialize"}

    assert routed <= agent_methods()
    assert {"auth/login", "auth/logout", "session/list", "session/close"} <= routed
    assert not {"session/load", "session/set_mode", "session/set_model", "logout"} & routed
    assert V1.login_method == "authenticate"


# --- a v2 connection -------------------------------------------------------------------


async def test_a_v2_session_answers_in_v2_shape_without_modes_or_legacy_models(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize(V2_INITIALIZE)
        answer = await client.call("session/new", {"cwd": str(tmp_path)})  # no mcpServers: v2
        await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": None})
        session_id = answer["sessionId"]
        listed = await client.call("session/list", {})
        resumed = await client.call(
            "session/resume", {"sessionId": session_id, "cwd": str(tmp_path)}
        )
        closed = await client.call("session/close", {"sessionId": session_id})
        # The commands, announced once the answer is out.
        await client.wait_for(
            lambda f: f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
        )

    assert_v2(answer, "NewSessionResponse")
    assert "modes" not in answer and "models" not in answer
    options = {option["configId"]: option for option in answer["configOptions"]}
    assert options["mode"]["category"] == "mode"
    assert options["model"]["options"][0]["groupId"]
    assert_v2(listed, "ListSessionsResponse")
    assert session_id in [s["sessionId"] for s in listed["sessions"]]
    assert_v2(resumed, "ResumeSessionResponse")
    assert "modes" not in resumed
    assert_v2(closed, "CloseSessionResponse")
    for update in client.updates(session_id):
        assert_v2(update, "SessionUpdate", stable=False)


async def test_a_v2_mode_change_is_a_config_option_update_and_never_a_mode_update(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize(V2_INITIALIZE)
        session_id = (await client.call("session/new", {"cwd": str(tmp_path)}))["sessionId"]
        params = {"sessionId": session_id, "configId": "mode", "type": "id", "value": "read-only"}
        answer = await client.call("session/set_config_option", params)
        # A marker after the mode change's updates: every one of them is in by its answer.
        await client.call("session/list", {})

    assert_v2(answer, "SetSessionConfigOptionResponse")
    mode = next(o for o in answer["configOptions"] if o["configId"] == "mode")
    assert mode["currentValue"] == "read-only"
    kinds = [update["sessionUpdate"] for update in client.updates(session_id)]
    assert "current_mode_update" not in kinds
    for update in client.updates(session_id):
        if update["sessionUpdate"] == "config_option_update":
            assert_v2(update, "SessionUpdate")


@pytest.mark.parametrize(
    "method", ["session/load", "session/set_mode", "session/set_model", "logout", "authenticate"]
)
async def test_v1_only_methods_are_not_found_on_a_v2_connection(
    connection: Connection, tmp_path: Path, method: str
) -> None:
    async with connection() as client:
        await client.initialize(V2_INITIALIZE)
        session_id = (await client.call("session/new", {"cwd": str(tmp_path)}))["sessionId"]
        params = {"sessionId": session_id, "cwd": str(tmp_path), "modeId": "ask"}
        error = await client.error(
            method, {**params, "modelId": "x", "methodId": "acp-agent-config"}
        )

    assert error["code"] == METHOD_NOT_FOUND


async def test_v2_logs_in_and_out_with_auth_login_and_auth_logout(connection: Connection) -> None:
    async with connection() as client:
        await client.initialize(V2_INITIALIZE)
        login = await client.call("auth/login", {"methodId": "acp-agent-config"})
        unknown = await client.error("auth/login", {"methodId": "nope"})
        logout = await client.call("auth/logout", {})

    assert_v2(login, "LoginAuthResponse")
    assert unknown["code"] == -32602
    assert_v2(logout, "LogoutAuthResponse")


async def test_a_v1_connection_still_speaks_v1(connection: Connection, tmp_path: Path) -> None:
    async with connection() as client:
        answer = await client.initialize()
        session = await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        mode = await client.call(
            "session/set_mode", {"sessionId": session["sessionId"], "modeId": "read-only"}
        )

    assert answer["protocolVersion"] == 1 and "agentCapabilities" in answer
    assert "modes" in session and "id" in session["configOptions"][0]
    assert mode == {}


@pytest.mark.parametrize(("first", "then"), [(V2_INITIALIZE, None), (None, V2_INITIALIZE)])
async def test_a_repeated_initialize_keeps_the_dialect_the_connection_began_with(
    connection: Connection, tmp_path: Path, first: Any, then: Any
) -> None:
    # A client that initializes again (reconnect logic, a probe) must not switch the
    # connection's dialect under the sessions it opened.
    async with connection() as client:
        opened = await client.initialize(first)
        again = await client.initialize(then)
        session = await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})

    assert again["protocolVersion"] == opened["protocolVersion"]
    if opened["protocolVersion"] == 2:
        assert_v2(again, "InitializeResponse")
        assert "modes" not in session
    else:
        assert "agentCapabilities" in again and "modes" in session
