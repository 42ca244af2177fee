"""What a local shell command sees of our environment: no credentials, the rest as it is.

The commands print their environment; planted secrets must not show, planted harmless
variables must. The last test drives a whole agent in-process, so it also proves that the
agent hands its config's policy and key variables to the shell.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent.child_env import child_environment
from acp_agent.cli import agent_loader
from acp_agent.config import AgentConfig
from acp_agent.protocol.server import serve
from acp_agent.rpc.endpoint import Endpoint, Work
from acp_agent.rpc.errors import METHOD_NOT_FOUND, RpcError
from acp_agent.rpc.framing import StreamSink, StreamSource
from acp_agent.tools import ToolContext
from acp_agent.tools.shell import Shell, ShellParams

pytestmark = pytest.mark.anyio

TOOL = Shell()
TIMEOUT = 20.0

PLANTED = {
    "OPENROUTER_KEY": "planted-openrouter",
    "OPENAI_API_KEY": "planted-openai",
    "GITHUB_TOKEN": "planted-github",
    "db_password": "planted-db",
    "MY_LLM": "planted-my-llm",
    "ACP_TEST_VISIBLE": "planted-visible",
}
SECRETS = [value for name, value in PLANTED.items() if name != "ACP_TEST_VISIBLE"]
CONFIG = """
[providers.echo]
type = "echo"

[providers.llm]
type = "openai-compatible"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "MY_LLM"
models = [{ id = "m" }]
"""


def agent_config(policy: str = "") -> AgentConfig:
    return AgentConfig.model_validate(tomllib.loads(CONFIG + policy))


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)


async def printed_environment(ctx: ToolContext) -> str:
    outcome = await TOOL.run(ShellParams(command="env"), ctx)
    return outcome.model_text


@pytest.mark.usefixtures("planted")
async def test_env_in_the_local_shell_shows_no_credential_and_keeps_the_rest(
    local_ctx: ToolContext,
) -> None:
    printed = await printed_environment(local_ctx)

    for secret in SECRETS:
        if secret != "planted-my-llm":  # ours only when a config names it (next test)
            assert secret not in printed
    assert "ACP_TEST_VISIBLE=planted-visible" in printed
    assert f"PATH={os.environ['PATH']}" in printed
    assert "PAGER=cat" in printed


@pytest.mark.usefixtures("planted")
async def test_the_variable_a_provider_reads_its_key_from_never_reaches_the_shell(
    local_ctx: ToolContext,
) -> None:
    config = agent_config("[shell_environment_policy]\nignore_default_excludes = true\n")
    ctx = dataclasses.replace(local_ctx, child_env=child_environment(os.environ, config))

    printed = await printed_environment(ctx)

    assert "planted-my-llm" not in printed
    assert "planted-openai" not in printed
    assert "GITHUB_TOKEN=planted-github" in printed  # the user lifted the default excludes


@pytest.mark.usefixtures("planted")
async def test_the_configured_policy_decides_what_the_shell_inherits(
    local_ctx: ToolContext,
) -> None:
    config = agent_config(
        '[shell_environment_policy]\ninherit = "core"\nset = { BUILD_MODE = "ci" }\n'
    )
    ctx = dataclasses.replace(local_ctx, child_env=child_environment(os.environ, config))

    printed = await printed_environment(ctx)

    assert "BUILD_MODE=ci" in printed
    assert "ACP_TEST_VISIBLE" not in printed
    assert f"HOME={os.environ['HOME']}" in printed


# --- through the whole agent ---------------------------------------------------------------


class _Client:
    """The editor side: no terminals (so the agent runs commands itself), approves all."""

    def __init__(self) -> None:
        self.frames: list[Any] = []

    def receive_request(self, method: str, params: Any) -> Work:
        async def answer() -> Any:
            if method == "session/request_permission":
                return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")

        return answer

    async def handle_notification(self, method: str, params: Any) -> None:
        self.frames.append(params)


@pytest.mark.usefixtures("planted")
async def test_a_command_the_model_runs_through_the_agent_sees_no_key_of_ours(
    tmp_path: Path,
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(CONFIG, encoding="utf-8")
    agent_env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **PLANTED}
    to_agent, agent_input = anyio.create_memory_object_stream[bytes](1024)
    agent_output, from_agent = anyio.create_memory_object_stream[bytes](1024)
    client = _Client()
    endpoint = Endpoint(StreamSource(from_agent), StreamSink(to_agent))

    async def run_agent() -> None:
        async with agent_output:
            await serve(
                StreamSource(agent_input),
                StreamSink(agent_output),
                load=agent_loader(str(config), agent_env),
            )

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_agent)
            tg.start_soon(endpoint.serve, client)
            await endpoint.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            session = await endpoint.request(
                "session/new", {"cwd": str(tmp_path), "mcpServers": []}
            )
            result = await endpoint.request(
                "session/prompt",
                {
                    "sessionId": session["sessionId"],
                    "prompt": [{"type": "text", "text": '@tool shell {"command": "env"}'}],
                },
            )
            await to_agent.aclose()

    seen = json.dumps(client.frames)
    assert result["stopReason"] == "end_turn"
    assert "ACP_TEST_VISIBLE=planted-visible" in seen
    for secret in SECRETS:
        assert secret not in seen
