"""The editor routes our LLM traffic (unstable `providers/list|set|disable`): the
`agent-client-protocol` SDK client drives `python -m acp_agent` against two fake LLM
servers, ours and the editor's "gateway".

The SDK has no typed call for the unstable `providers/*` methods; they go through its
connection's own `send_request` (the same JSON-RPC framing as every other call).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import AgentThoughtChunk, ConfigOptionUpdate
from e2e_support import API_KEY
from fake_llm import FakeLLM, fake_reply
from test_e2e_sdk_client import RecordingClient, prompt, running_agent

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

SECRET = "editor-secret-7f3a9c"
"""The editor's credential for its gateway: must reach the gateway and nowhere else."""
EDITOR_HEADERS = {"Authorization": f"Bearer {SECRET}", "X-Editor-Route": "ide-42"}


@pytest.fixture
def gateway() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@dataclass(frozen=True)
class Editor:
    """What each test starts agents with: a config of two providers on our server (`main`,
    the default, and `side`), a debug log file and a state directory of the test's own."""

    env: dict[str, str]
    state: Path
    log_file: Path
    stderr: Path
    workspace: Path

    def agent(self) -> AbstractAsyncContextManager[tuple[Any, Any, RecordingClient]]:
        """One agent process (one editor window), initialized by the SDK client."""
        return running_agent(self.env, self.stderr, self.workspace)

    async def new_session(self, conn: Any) -> str:
        session = await conn.new_session(cwd=str(self.workspace), mcp_servers=[])
        return str(session.session_id)

    def configure(self, line: str) -> None:
        """One more top-level setting in the config file."""
        config = Path(self.env["ACP_AGENT_CONFIG"])
        config.write_text(f"{line}\n{config.read_text(encoding='utf-8')}", encoding="utf-8")

    def assert_secret_nowhere(self) -> None:
        """Not in the store's files, the debug log or stderr."""
        stored = every_file_text(self.state)
        assert "through the gateway" in stored  # the session was stored, without the secret
        assert SECRET not in stored
        logged = self.log_file.read_text(encoding="utf-8")
        assert "providers/set" in logged  # the debug log did see the frames
        assert SECRET not in logged and SECRET not in self.stderr.read_text(encoding="utf-8")


@pytest.fixture
def editor(fake_llm: FakeLLM, tmp_path: Path, agent_stderr: Path, workspace: Path) -> Editor:
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
    return Editor(env, state, log_file, agent_stderr, workspace)


async def call(conn: Any, method: str, params: dict[str, Any]) -> Any:
    return await asyncio.wait_for(conn._conn.send_request(method, params), 10)


async def listing(conn: Any) -> dict[str, Any]:
    answer = await call(conn, "providers/list", {})
    return {p["providerId"]: p for p in answer["providers"]}


async def route(conn: Any, provider_id: str, base_url: str) -> None:
    """`providers/set` of an OpenAI-style gateway, with the editor's headers."""
    params = {"apiType": "openai", "baseUrl": base_url, "headers": EDITOR_HEADERS}
    assert await call(conn, "providers/set", {"providerId": provider_id} | params) == {}


def model_descriptions(config_options: Any, provider: str) -> dict[str, str]:
    """The model picker's options of one provider, with their descriptions."""
    model = next(o for o in config_options if o.id == "model")
    return {
        o.value: o.description or ""
        for g in model.options
        for o in g.options
        if g.group == provider
    }


def notices(client: RecordingClient, session_id: str) -> list[str]:
    """The notices a client without `session.notices` is shown: a bracketed line each, in
    the thoughts."""
    return [
        u.content.text
        for u in client.of(session_id)
        if isinstance(u, AgentThoughtChunk) and u.content.text.startswith("[")
    ]


def every_file_text(root: Path) -> str:
    return "".join(
        p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*") if p.is_file()
    )


async def test_set_routes_this_process_to_the_gateway_with_the_editors_headers_only(
    fake_llm: FakeLLM, gateway: FakeLLM, editor: Editor
) -> None:
    async with (
        editor.agent() as (conn, _, client),
        editor.agent() as (other, _, other_client),
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
            ({"providerId": "nope", "apiType": "bedrock"}, "apiType"),  # new: not buildable
            ({"providerId": "no/pe"}, "providerId"),
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

        await route(conn, "main", gateway.base_url)
        after = await listing(conn)
        assert after["main"]["current"] == {"apiType": "openai", "baseUrl": gateway.base_url}
        assert SECRET not in str(after)

        session = await conn.new_session(cwd=str(editor.workspace), mcp_servers=[])
        descriptions = model_descriptions(session.config_options, "main")
        assert descriptions and all("routed by the editor" in d for d in descriptions.values())
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
        other_session = await other.new_session(cwd=str(editor.workspace), mcp_servers=[])
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

    editor.assert_secret_nowhere()


async def test_disable_moves_sessions_off_the_provider_and_keeps_the_required_one(
    fake_llm: FakeLLM, editor: Editor
) -> None:
    async with editor.agent() as (conn, _, client):
        sid = await editor.new_session(conn)
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
        # Told in a notice (a bracketed line in the thoughts, for this client), not as
        # words of the conversation.
        (notice,) = notices(client, sid)
        assert "side/fake-model" in notice and "main/fake-model" in notice
        assert "side/fake-model" not in client.text(sid)

        with pytest.raises(RequestError) as chosen:
            await conn.set_config_option(session_id=sid, config_id="model", value="side/fake-model")
        assert chosen.value.code == -32602

        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("after")), 20)
        (sent,) = [e for e in fake_llm.exchanges if e.method == "POST"]
        assert sent.body["model"] == "fake-model"
        assert await call(conn, "providers/disable", {"providerId": "side"}) == {}


async def test_a_provider_the_editor_adds_offers_its_gateways_models_routed_by_the_editor(
    fake_llm: FakeLLM, gateway: FakeLLM, editor: Editor
) -> None:
    gateway.model_list = ["gw-large"]
    async with editor.agent() as (conn, _, client), editor.agent() as (other, _, _):
        sid = await editor.new_session(conn)
        client.updates.clear()
        await route(conn, "air", gateway.base_url)
        assert (await listing(conn))["air"] == {
            "providerId": "air",
            "supported": ["openai"],
            "required": False,
            "current": {"apiType": "openai", "baseUrl": gateway.base_url},
        }
        (asked,) = [e for e in gateway.exchanges if e.method == "GET"]
        assert asked.path == "/v1/models"
        assert asked.headers["authorization"] == f"Bearer {SECRET}"
        assert API_KEY not in str(asked.headers)

        # The open session's picker gains the gateway's models, as routed by the editor.
        await client.wait_until(
            lambda: any(isinstance(u, ConfigOptionUpdate) for u in client.of(sid))
        )
        update = next(u for u in client.of(sid) if isinstance(u, ConfigOptionUpdate))
        descriptions = model_descriptions(update.config_options, "air")
        assert list(descriptions) == ["air/gw-large"]
        assert "routed by the editor" in descriptions["air/gw-large"]

        await conn.set_config_option(session_id=sid, config_id="model", value="air/gw-large")
        await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=prompt("through the gateway")), 20
        )
        assert client.text(sid) == fake_reply("through the gateway")
        (sent,) = [e for e in gateway.exchanges if e.method == "POST"]
        assert sent.body["model"] == "gw-large"
        assert sent.headers["authorization"] == f"Bearer {SECRET}"
        assert API_KEY not in str(sent.headers)
        assert not [e for e in fake_llm.exchanges if e.method == "POST"]

        assert "air" not in await listing(other)  # another editor window: the config's only

    editor.assert_secret_nowhere()


async def test_a_session_reopened_on_a_disabled_provider_moves_to_the_default_with_a_notice(
    fake_llm: FakeLLM, editor: Editor
) -> None:
    async with editor.agent() as (conn, _, _):
        sid = await editor.new_session(conn)
        await conn.set_config_option(session_id=sid, config_id="model", value="side/fake-model")

    async with editor.agent() as (conn, _, client):
        assert await call(conn, "providers/disable", {"providerId": "side"}) == {}
        cwd = str(editor.workspace)
        forked = await conn.fork_session(session_id=sid, cwd=cwd, mcp_servers=[])
        loaded = await conn.load_session(session_id=sid, cwd=cwd, mcp_servers=[])
        for options in (forked.config_options, loaded.config_options):
            model = next(o for o in options or () if o.id == "model")
            assert model.current_value == "main/fake-model"

        opened = (forked.session_id, sid)
        await client.wait_until(lambda: all(notices(client, s) for s in opened))
        for session_id in opened:
            (notice,) = notices(client, session_id)
            assert "side/fake-model" in notice and "main/fake-model" in notice
            assert "side/fake-model" not in client.text(session_id)

        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("still here")), 20)
        assert client.text(sid).endswith(fake_reply("still here"))
        (sent,) = [e for e in fake_llm.exchanges if e.method == "POST"]
        assert sent.body["model"] == "fake-model"


async def test_a_subagent_model_on_a_disabled_provider_gives_way_to_the_sessions_model(
    fake_llm: FakeLLM, editor: Editor
) -> None:
    editor.configure('subagent_model = "side/fake-model"')
    task = json.dumps({"description": "ask", "prompt": "hello child"})
    async with editor.agent() as (conn, _, client):
        assert await call(conn, "providers/disable", {"providerId": "side"}) == {}
        sid = await editor.new_session(conn)
        await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=prompt(f"[[tool agent {task}]]")), 30
        )
    # The child answered (on the session's model): its reply is the tool's result.
    assert client.text(sid) == f"Tool result: {fake_reply('hello child')}"
