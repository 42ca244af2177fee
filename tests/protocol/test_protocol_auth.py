"""Logging in over the wire, in-process: the auth methods each client is offered (checked
against the 1.25 schema), `authenticate`, `logout`, a stored key in use, and `auth_required`
naming the way to log in.

The agent's credentials file is the test's (`$HOME/.config/acp-agent`, see tests/conftest.py);
`CredentialStore(credentials_path())` writes what `acp-agent login` would.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from acp.schema import InitializeResponse
from fake_acp_client import TIMEOUT, ZED_CLIENT_CAPABILITIES, ZED_INITIALIZE, FakeClient

from acp_agent.cli import agent_loader
from acp_agent.credentials import CredentialStore, credentials_path
from acp_agent.protocol.server import serve
from acp_agent.rpc.framing import StreamSink, StreamSource
from acp_agent.sessions.store import default_state_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fake_anthropic import FakeAnthropic
from fake_llm import FakeLLM

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

SCHEMA = Path(__file__).parent / "fixtures" / "auth-elicitation.schema.json"
STORED = "sk-stored-7a6b5c4d3e2f1a0b9c8d7e6f"
INVALID_PARAMS = -32602
AUTH_REQUIRED = -32000
ACPX_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
    "clientInfo": {"name": "acpx", "version": "0.1.0"},
}
"""What acpx sends: no `auth`, no `_meta`."""
TYPED_ONLY: dict[str, Any] = {
    **ZED_INITIALIZE,
    "clientCapabilities": {"auth": {"terminal": True}},
}
META_ONLY: dict[str, Any] = {
    **ZED_INITIALIZE,
    "clientCapabilities": {"_meta": {"terminal-auth": True}},
}


@cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return schema


def assert_schema(definition: str, value: Any) -> None:
    """`value` is valid as `definition` of the ACP stable schema 1.25."""
    jsonschema.validate(value, {"$ref": f"#/$defs/{definition}", "$defs": _schema()["$defs"]})


def store() -> CredentialStore:
    return CredentialStore(credentials_path())


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def openai_config(tmp_path: Path, fake_llm: FakeLLM) -> Path:
    """An openai provider at the fake server, whose key nothing but a login gives."""
    path = tmp_path / "config.toml"
    path.write_text(
        f'[providers.openai]\ntype = "openai"\nbase_url = "{fake_llm.base_url}"\n'
        '[[providers.openai.models]]\nid = "fake-model"\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """Refuses any key but the stored one (the OpenAI fake is a local server, which gets a
    placeholder key when none is given, so it cannot show a key missing)."""
    with FakeAnthropic(api_key=STORED) as fake:
        yield fake


@pytest.fixture
def anthropic_config(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Path:
    """An anthropic provider at the fake server, whose key nothing but a login gives."""
    path = tmp_path / "anthropic.toml"
    path.write_text(
        f'[providers.claude]\ntype = "anthropic"\nbase_url = "{fake_anthropic.base_url}"\n'
        '[[providers.claude.models]]\nid = "claude-fake"\n',
        encoding="utf-8",
    )
    return path


def by_id(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {method["id"]: method for method in result["authMethods"]}


# --- what initialize offers ------------------------------------------------------------------


async def test_zed_is_offered_a_terminal_login_running_our_command_with_login(
    connection: Connection,
) -> None:
    async with connection() as client:
        result = await client.initialize(copy.deepcopy(ZED_INITIALIZE))

    InitializeResponse.model_validate(result)
    methods = by_id(result)
    assert set(methods) == {"acp-agent-config", "acp-agent-login"}
    login = methods["acp-agent-login"]
    assert login["type"] == "terminal"
    assert login["args"] == ["login"]
    assert_schema("AuthMethodTerminal", login)
    # Zed's older `_meta["terminal-auth"]`: the whole command line.
    legacy = login["_meta"]["terminal-auth"]
    assert legacy["command"] == sys.executable
    assert legacy["args"][:2] == ["-m", "acp_agent"]
    assert legacy["args"][-1] == "login"
    for method in result["authMethods"]:
        assert_schema("AuthMethod", method)
    assert "type" not in methods["acp-agent-config"]  # agent: the type left out, as v1 reads
    assert_schema("AuthMethodAgent", methods["acp-agent-config"])
    assert "acp-agent login" in methods["acp-agent-config"]["description"]


@pytest.mark.parametrize(
    ("params", "terminal", "meta"),
    [
        (ACPX_INITIALIZE, False, False),
        ({"protocolVersion": 1}, False, False),
        (TYPED_ONLY, True, False),
        (META_ONLY, False, True),
    ],
    ids=["acpx", "bare", "auth.terminal only", "_meta terminal-auth only"],
)
async def test_the_terminal_method_goes_only_to_clients_that_run_it(
    connection: Connection, params: dict[str, Any], terminal: bool, meta: bool
) -> None:
    async with connection() as client:
        result = await client.initialize(params)

    InitializeResponse.model_validate(result)
    methods = by_id(result)
    assert "acp-agent-config" in methods, "the agent method is always there (ACP registry)"
    login = methods.get("acp-agent-login")
    assert (login is not None) == (terminal or meta)
    if login is not None:
        assert (login.get("type") == "terminal") == terminal
        assert ("_meta" in login) == meta
        assert_schema("AuthMethod", login)
    assert all(m.get("type", "agent") in ("agent", "terminal") for m in result["authMethods"])


async def test_no_method_outside_the_stable_schema_is_offered(connection: Connection) -> None:
    async with connection() as client:
        result = await client.initialize()
    assert not [m for m in result["authMethods"] if m.get("type") == "env_var"]


async def test_logout_is_advertised(connection: Connection) -> None:
    async with connection() as client:
        result = await client.initialize()
    assert result["agentCapabilities"]["auth"] == {"logout": {}, "status": {}}
    assert_schema("AgentAuthCapabilities", result["agentCapabilities"]["auth"])


# --- authenticate ----------------------------------------------------------------------------


async def test_authenticate_with_the_agent_method_succeeds(connection: Connection) -> None:
    async with connection() as client:
        await client.initialize()
        assert_schema("AuthenticateRequest", {"methodId": "acp-agent-config"})
        result = await client.call("authenticate", {"methodId": "acp-agent-config"})
    assert result == {}
    assert_schema("AuthenticateResponse", result)


@pytest.mark.parametrize("method", ["openai-api-key", "nope", ""])
async def test_authenticate_with_an_unknown_method_is_invalid_params_with_details(
    connection: Connection, method: str
) -> None:
    async with connection() as client:
        await client.initialize(ACPX_INITIALIZE)
        error = await client.error("authenticate", {"methodId": method})
    assert error["code"] == INVALID_PARAMS
    assert repr(method) in error["message"]
    assert "acp-agent-config" in error["data"]["details"]


# --- a stored key, logout, auth_required -----------------------------------------------------


async def test_a_stored_key_is_used_and_never_logged_or_stored_in_the_session(
    connection: Connection,
    openai_config: Path,
    fake_llm: FakeLLM,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    store().save("openai", STORED, use_keyring=False)
    async with connection(str(openai_config)) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        reply = await client.prompt(session_id, f"hello, my key is {STORED}")

    assert reply["result"]["stopReason"] == "end_turn"
    [exchange] = [e for e in fake_llm.exchanges if e.path.endswith("/chat/completions")]
    assert exchange.headers["authorization"] == f"Bearer {STORED}"
    assert STORED not in caplog.text
    sessions = default_state_dir() / "sessions"
    written = "".join(p.read_text() for p in sessions.iterdir())
    assert session_id in written
    assert STORED not in written, "stored keys are redacted from session files"


async def test_logout_forgets_stored_keys_and_the_next_prompt_needs_a_login(
    connection: Connection, anthropic_config: Path, tmp_path: Path
) -> None:
    store().save("claude", STORED, use_keyring=False)
    async with connection(str(anthropic_config)) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        first = await client.prompt(session_id, "hi")
        assert_schema("LogoutRequest", {})
        result = await client.call("logout", {})
        error = await client.error(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "again"}]},
        )

    assert first["result"]["stopReason"] == "end_turn"
    assert result == {}
    assert_schema("LogoutResponse", result)
    assert not credentials_path().exists()
    assert error["code"] == AUTH_REQUIRED
    assert "acp-agent login" in error["message"]
    assert "acp-agent login" in error["data"]["details"]


async def test_auth_required_names_the_way_to_log_in(
    connection: Connection, tmp_path: Path
) -> None:
    config = tmp_path / "openai.toml"
    config.write_text(
        '[providers.openai]\ntype = "openai"\n[[providers.openai.models]]\nid = "gpt-4.1"\n'
    )
    async with connection(str(config)) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        error = await client.error(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]},
        )
    assert error["code"] == AUTH_REQUIRED
    assert "OPENAI_API_KEY is not set" in error["message"]
    assert "`acp-agent login openai`" in error["message"]
    assert "login button" in error["message"]
    assert error["data"]["details"] == error["message"]


async def test_a_login_made_while_the_agent_runs_is_used_by_the_next_prompt(
    connection: Connection, anthropic_config: Path, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    async with connection(str(anthropic_config)) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        before = await client.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]},
        )
        store().save("claude", STORED, use_keyring=False)  # the editor's login terminal
        after = await client.prompt(session_id, "hi again")

    assert before["error"]["code"] == AUTH_REQUIRED
    assert after["result"]["stopReason"] == "end_turn"
    assert fake_anthropic.exchanges[-1].api_key == STORED


async def test_logout_without_stored_keys_is_fine(connection: Connection) -> None:
    async with connection() as client:
        await client.initialize()
        assert await client.call("logout") == {}
        assert await client.call("logout", {"_meta": {"x": 1}}) == {}


def test_zed_capabilities_in_the_fake_client_are_zeds() -> None:
    """The handshake these tests call Zed's is the one CLIENTS.md records."""
    assert ZED_CLIENT_CAPABILITIES["auth"] == {"terminal": True}
    assert ZED_CLIENT_CAPABILITIES["_meta"]["terminal-auth"] is True
    assert isinstance(FakeClient, type)


async def test_authenticate_answers_while_the_agent_is_still_starting(tmp_path: Path) -> None:
    """CodeCompanion calls it before its first prompt: it must not wait for the warm-up
    (config, providers), which here lasts until both answers have arrived."""
    answered = threading.Event()
    load = agent_loader(None, {})

    def slow_load() -> Any:
        answered.wait(TIMEOUT)
        return load()

    to_agent, agent_input = anyio.create_memory_object_stream[bytes](64)
    agent_output, from_agent = anyio.create_memory_object_stream[bytes](64)
    async with anyio.create_task_group() as tg:
        client = FakeClient(to_agent, tg)

        async def run_agent() -> None:
            async with agent_output:
                await serve(StreamSource(agent_input), StreamSink(agent_output), load=slow_load)

        tg.start_soon(run_agent)
        tg.start_soon(client.read_frames, from_agent)
        await client.initialize()
        with anyio.fail_after(TIMEOUT / 2):
            result = await client.call("authenticate", {"methodId": "acp-agent-config"})
            error = await client.error("authenticate", {"methodId": "nope"})
        answered.set()
        session_id = await client.new_session(tmp_path)  # the agent then starts as before
        await client.close()

    assert not client.schema_problems, client.schema_problems
    assert result == {}
    assert error["code"] == INVALID_PARAMS and "acp-agent-config" in error["data"]["details"]
    assert session_id
