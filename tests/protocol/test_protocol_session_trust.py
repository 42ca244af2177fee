"""What a session keeps is kept safely: an "always allow" answer comes back when the session
is loaded in the roots it was given in, and not in others; a key stored with `acp-agent
login` while the agent runs never reaches the session's files.

Each `connection()` block is one agent process on the test's state dir; the echo provider
scripts the tool call (`@tool NAME {json}`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_acp_client import FakeClient, selected

from acp_agent.credentials import CredentialStore, credentials_path
from acp_agent.sessions.store import default_state_dir

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

COMMAND = 'Again\n@tool shell {"command": "echo remembered"}'
LOCAL_SHELL_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False},
    "clientInfo": {"name": "trust-test", "version": "1"},
}
"""No client terminals: `shell` runs locally, after asking."""
LATE_KEY = "sk-stored-while-running-0123456789"
ECHO_AND_OPENAI = """
default_model = "echo/echo"
[providers.echo]
type = "echo"
models = [{ id = "echo" }]
[providers.openai]
type = "openai"
models = [{ id = "gpt-4.1" }]
"""


async def load(client: FakeClient, session_id: str, cwd: Path, **extra: Any) -> None:
    params = {"sessionId": session_id, "cwd": str(cwd), "mcpServers": [], **extra}
    reply = await client.request("session/load", params)
    assert "error" not in reply, reply


async def asked_while_running(client: FakeClient, session_id: str) -> int:
    """How often the command asked, answered "reject once" (were it run, it would fail)."""
    client.permission_answer = selected("reject_once")
    before = len(client.agent_requests_for("session/request_permission"))
    reply = await client.prompt(session_id, COMMAND)
    assert "error" not in reply, reply
    return len(client.agent_requests_for("session/request_permission")) - before


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    project, other, library = tmp_path / "project", tmp_path / "other", tmp_path / "library"
    for directory in (project, other, library):
        directory.mkdir()
    return project, other, library


async def test_always_allow_given_in_one_cwd_asks_again_in_another_and_not_in_the_same(
    connection: Connection, roots: tuple[Path, Path, Path]
) -> None:
    project, other, _ = roots
    async with connection() as client:
        await client.initialize(LOCAL_SHELL_INITIALIZE)
        session_id = await client.new_session(project)
        client.permission_answer = selected("allow_always")
        await client.prompt(session_id, COMMAND)
        assert len(client.agent_requests_for("session/request_permission")) == 1

    async with connection() as client:
        await client.initialize(LOCAL_SHELL_INITIALIZE)
        await load(client, session_id, other)
        asked_elsewhere = await asked_while_running(client, session_id)

    async with connection() as client:
        await client.initialize(LOCAL_SHELL_INITIALIZE)
        await load(client, session_id, project)
        asked_at_home = await asked_while_running(client, session_id)

    assert asked_elsewhere == 1
    assert asked_at_home == 0


async def test_other_additional_directories_are_other_roots_and_a_live_move_drops_trust(
    connection: Connection, roots: tuple[Path, Path, Path]
) -> None:
    project, _, library = roots
    async with connection() as client:
        await client.initialize(LOCAL_SHELL_INITIALIZE)
        session_id = await client.new_session(project, additionalDirectories=[str(library)])
        client.permission_answer = selected("allow_always")
        await client.prompt(session_id, COMMAND)
        # Resumed live without the library: other roots, so it asks again.
        params = {"sessionId": session_id, "cwd": str(project), "mcpServers": []}
        assert "error" not in await client.request("session/resume", params)
        asked_live = await asked_while_running(client, session_id)

    async with connection() as client:
        await client.initialize(LOCAL_SHELL_INITIALIZE)
        await load(client, session_id, project)
        asked_without_library = await asked_while_running(client, session_id)

    assert asked_live == 1
    assert asked_without_library == 1


async def test_a_key_stored_by_login_while_the_agent_runs_is_redacted_from_session_files(
    connection: Connection, tmp_path: Path
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(ECHO_AND_OPENAI, encoding="utf-8")
    async with connection(str(config)) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        CredentialStore(credentials_path()).save("openai", LATE_KEY, use_keyring=False)
        reply = await client.prompt(session_id, f"my key is {LATE_KEY}")
        [listed] = (await client.call("session/list", {}))["sessions"]

    assert reply["result"] == {"stopReason": "end_turn"}
    files = list((default_state_dir() / "sessions").iterdir())
    assert {p.name for p in files} == {f"{session_id}.jsonl", f"{session_id}.meta.json"}
    for path in files:
        assert LATE_KEY not in path.read_text(encoding="utf-8"), path.name
    assert listed["title"] == "my key is [redacted]"
