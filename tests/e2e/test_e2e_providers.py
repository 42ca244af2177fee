"""The editor routes our LLM traffic (unstable `providers/list|set|disable`): the
`agent-client-protocol` SDK client drives `python -m acp_agent` against two fake LLM
servers, ours and the editor's "gateway".

The SDK has no typed call for the unstable `providers/*` methods; they go through its
connection's own `send_request` (the same JSON-RPC framing as every other call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import ConfigOptionUpdate
from e2e_support import API_KEY
from fake_llm import FakeLLM, fake_reply
from test_e2e_sdk_client import prompt, running_agent

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

SECRET = "editor-secret-7f3a9c"
"""The editor's credential for its gateway: must reach the gateway and nowhere else."""
EDITOR_HEADERS = {"Authorization": f"Bearer {SECRET}", "X-Editor-Route": "ide-42"}


@pytest.fixture
def gateway() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def setup(fake_llm: FakeLLM, tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """Two providers on our server (`main`, the default, and `side`), a debug log file
    and a state directory of the test's own."""
    state, log_file = tmp_path / "state", tmp_path / "agent.log"
    config = tmp_path / "config.toml"
    models = '[{id = "fake-model", context_window = 32768}]'
    config.write_text(
        f'default_model = "main/fake-model"\n'
        f'log_file = "{log_file}"\nlog_level = "debug"\nstate_dir = "{state}"\n'
        f'[providers.main]\ntype = "openai-compatible"\nbase_url = "{fake_llm.base_url}"\n'
        f'api_key_env = "OPENAI_API_KEY"\nmodels = {models}\n'
        f'[providers.side]\ntype = "openai-compatible"\nbase_url = "{fake_llm.base_url}"\n'
        f'api_key_env = "OPENAI_API_KEY"\nmodels = {models}\n',
        encoding="utf-8",
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "OPENAI_API_KEY": API_KEY,
        "ACP_AGENT_CONFIG": str(config),
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
    }
    return env, state, log_file


async def call(conn: Any, method: str, params: dict[str, Any]) -> Any:
    return await asyncio.wait_for(conn._conn.send_request(method, params), 10)


async def listing(conn: Any) -> dict[str, Any]:
    answer = await call(conn, "providers/list", {})
    return {p["providerId"]: p for p in answer["providers"]}


def every_file_text(root: Path) -> str:
    return "".join(
        p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*") if p.is_file()
    )


async def test_set_routes_this_process_to_the_gateway_with_the_editors_headers_only(
    fake_llm: FakeLLM,
    gateway: FakeLLM,
    setup: tuple[dict[str, str], Path, Path],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    env, state, log_file = setup
    async with (
        running_agent(env, agent_stderr, workspace) as (conn, _, client),
        running_agent(env, agent_stderr, workspace) as (other, _, other_client),
    ):
        before = await listing(conn)
        assert before["main"] == {
            "providerId": "main",
            "supported": ["openai"],
            "required": True,
            "current": {"apiType": "openai", "baseUrl": fake_llm.base_url},
        }
        assert before["side"]["required"] is False

        bad: list[tuple[dict[str, Any], str]] = [
            ({"apiType": "grpc"}, "apiType"),
            ({"baseUrl": "file:///etc/passwd"}, "baseUrl"),
            ({"headers": {"X-Evil": "a\r\nHost: evil"}}, "headers.X-Evil"),
            ({"headers": {"X-Count": 5}}, "headers.X-Count"),
            ({"headers": {"Bad\nName": "v"}}, "headers"),
            ({"providerId": "nope"}, "providerId"),
        ]
        for change, field in bad:
            params = {"providerId": "main", "apiType": "openai", "baseUrl": gateway.base_url}
            params |= change
            with pytest.raises(RequestError) as refused:
                await call(conn, "providers/set", params)
            assert refused.value.code == -32602
            assert field in str(refused.value)
            assert "Host: evil" not in str(refused.value)
        assert await listing(conn) == before  # nothing changed

        await call(
            conn,
            "providers/set",
            {
                "providerId": "main",
                "apiType": "openai",
                "baseUrl": gateway.base_url,
                "headers": EDITOR_HEADERS,
            },
        )
        after = await listing(conn)
        assert after["main"]["current"] == {"apiType": "openai", "baseUrl": gateway.base_url}
        assert SECRET not in str(after)

        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        model = next(o for o in session.config_options if o.id == "model")
        descriptions = [
            o.description for g in model.options for o in g.options if g.group == "main"
        ]
        assert descriptions and all("routed by the editor" in (d or "") for d in descriptions)
        await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=prompt("through the gateway")), 20
        )
        assert client.text(session.session_id) == fake_reply("through the gateway")
        (sent,) = [e for e in gateway.exchanges if e.method == "POST"]
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == f"Bearer {SECRET}"
        assert sent.headers["x-editor-route"] == "ide-42"
        assert API_KEY not in str(sent.headers)
        assert not [e for e in fake_llm.exchanges if e.method == "POST"]

        # The other process (another editor window) still talks to our server, with our key.
        assert (await listing(other)) == before
        other_session = await other.new_session(cwd=str(workspace), mcp_servers=[])
        await asyncio.wait_for(
            other.prompt(session_id=other_session.session_id, prompt=prompt("ours")), 20
        )
        assert other_client.text(other_session.session_id) == fake_reply("ours")
        (ours,) = [e for e in fake_llm.exchanges if e.method == "POST"]
        assert ours.headers["authorization"] == f"Bearer {API_KEY}"
        assert len([e for e in gateway.exchanges if e.method == "POST"]) == 1

        # A refusal from the gateway names the gateway, not a key variable of ours, and
        # does not quote the editor's credential back.
        with pytest.raises(RequestError) as refused_401:
            await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=prompt("[[status 401]]")), 20
            )
        message = str(refused_401.value)
        assert gateway.base_url in message and "editor" in message
        assert "OPENAI_API_KEY" not in message and SECRET not in message

    assert_secret_nowhere(state, log_file, agent_stderr)


def assert_secret_nowhere(state: Path, log_file: Path, stderr: Path) -> None:
    """Not in the store's files, the debug log or stderr."""
    stored = every_file_text(state)
    assert "through the gateway" in stored  # the session was stored, without the secret
    assert SECRET not in stored
    logged = log_file.read_text(encoding="utf-8")
    assert "providers/set" in logged  # the debug log did see the frames
    assert SECRET not in logged and SECRET not in stderr.read_text(encoding="utf-8")


async def test_disable_moves_sessions_off_the_provider_and_keeps_the_required_one(
    fake_llm: FakeLLM,
    setup: tuple[dict[str, str], Path, Path],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    env, _, _ = setup
    async with running_agent(env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        await conn.set_config_option(session_id=sid, config_id="model", value="side/fake-model")

        with pytest.raises(RequestError) as refused:
            await call(conn, "providers/disable", {"providerId": "main"})
        assert refused.value.code == -32602 and "required" in str(refused.value)
        assert await call(conn, "providers/disable", {"providerId": "no-such"}) == {}

        client.updates.clear()
        assert await call(conn, "providers/disable", {"providerId": "side"}) == {}
        assert (await listing(conn))["side"]["current"] is None
        await client.wait_until(
            lambda: any(isinstance(u, ConfigOptionUpdate) for u in client.of(sid))
        )
        update = next(u for u in client.of(sid) if isinstance(u, ConfigOptionUpdate))
        model = next(o for o in update.config_options if o.id == "model")
        assert model.current_value == "main/fake-model"
        assert [g.group for g in model.options] == ["main"]
        assert "side/fake-model" in client.text(sid) and "main/fake-model" in client.text(sid)

        with pytest.raises(RequestError) as chosen:
            await conn.set_config_option(session_id=sid, config_id="model", value="side/fake-model")
        assert chosen.value.code == -32602

        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("after")), 20)
        (sent,) = [e for e in fake_llm.exchanges if e.method == "POST"]
        assert sent.body["model"] == "fake-model"
        assert await call(conn, "providers/disable", {"providerId": "side"}) == {}
