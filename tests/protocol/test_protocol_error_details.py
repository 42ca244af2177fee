"""Every error answered carries its readable reason in `data.details` too: Toad and acpx
show only that (without it Toad shows a generic "agent failed to start")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient
from fake_llm import FakeLLM

from acp_agent.rpc.errors import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
)

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def openai_compatible(base_url: str) -> str:
    return f"""
[providers.fake]
type = "openai-compatible"
base_url = "{base_url}"
retry = {{ max_attempts = 3, initial_delay = 0.01, max_delay = 0.02 }}
models = [{{ id = "fake-model" }}]
"""


def assert_detailed(error: dict[str, Any], code: int) -> str:
    """The error's code, and its message repeated in `data.details`; returns the message."""
    assert error["code"] == code, error
    message: str = error["message"]
    assert message
    assert error["data"]["details"] == message, error
    return message


async def prompt_error(client: FakeClient, session_id: str, text: str) -> dict[str, Any]:
    reply = await client.prompt(session_id, text)
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


async def test_a_persistent_server_error_fails_the_prompt_with_details(
    connection: Connection, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    config = write_config(tmp_path, openai_compatible(fake_llm.base_url))
    async with connection(config) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        error = await prompt_error(client, session_id, "[[status 500]] hi")

    message = assert_detailed(error, INTERNAL_ERROR)
    assert "500" in message and "gave up after 3 attempts" in message


async def test_a_closed_port_fails_the_prompt_with_details(
    connection: Connection, tmp_path: Path
) -> None:
    config = write_config(tmp_path, openai_compatible("http://127.0.0.1:1/v1"))
    async with connection(config) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        error = await prompt_error(client, session_id, "hi")

    message = assert_detailed(error, INTERNAL_ERROR)
    assert message.startswith("fake: ") and "127.0.0.1:1" in message


async def test_a_missing_key_is_auth_required_with_details_naming_the_variable(
    connection: Connection, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path,
        """
[providers.openai]
type = "openai"
api_key_env = "ACP_TEST_MISSING_KEY"
models = [{ id = "gpt-test" }]
""",
    )
    async with connection(config) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        error = await prompt_error(client, session_id, "hi")

    assert "ACP_TEST_MISSING_KEY" in assert_detailed(error, AUTH_REQUIRED)


async def test_a_prompt_for_an_unknown_session_has_details(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        error = await prompt_error(client, "sess_nope", "hi")

    assert "sess_nope" in assert_detailed(error, RESOURCE_NOT_FOUND)


async def test_invalid_params_and_unknown_methods_have_details(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        invalid = await client.error("session/prompt", {"prompt": []})
        unknown = await client.error("session/nope", {})
        choice = await client.error(
            "session/set_mode", {"sessionId": await client.new_session(tmp_path), "modeId": "x"}
        )

    assert "sessionId" in assert_detailed(invalid, INVALID_PARAMS)
    assert "session/nope" in assert_detailed(unknown, METHOD_NOT_FOUND)
    assert "unknown mode 'x'" in assert_detailed(choice, INVALID_PARAMS)


async def test_a_config_that_fails_to_load_answers_every_request_with_details(
    connection: Connection, tmp_path: Path
) -> None:
    config = write_config(tmp_path, "[providers.broken]\ntype = 42\n")
    async with connection(config) as client:
        await client.initialize()
        error = await client.error("session/new", {"cwd": str(tmp_path), "mcpServers": []})

    assert "agent.toml" in assert_detailed(error, INTERNAL_ERROR)


async def test_an_unexpected_failure_is_internal_error_with_a_short_detail(
    connection: Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_agent.agent import Agent

    async def broken(self: Agent, request: Any) -> Any:
        raise KeyError("surprise")

    monkeypatch.setattr(Agent, "list_sessions", broken)
    async with connection() as client:
        await client.initialize()
        error = await client.error("session/list", {})

    assert assert_detailed(error, INTERNAL_ERROR) == "session/list failed: KeyError: 'surprise'"
