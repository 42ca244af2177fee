"""ask_user end to end: the `agent-client-protocol` package's client (which routes
`elicitation/create` to `create_elicitation`) answers the question the offline echo
provider's model asks (`@tool ask_user {...}`); acpx, which advertises no elicitation, is
never offered the tool.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import (
    AcceptElicitationResponse,
    AgentMessageChunk,
    CancelElicitationResponse,
    ClientCapabilities,
    DeclineElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationFormSessionMode,
    FileSystemCapabilities,
    Implementation,
    ToolCallProgress,
    ToolCallStart,
)
from acpx_support import needs_acpx, run_acpx
from e2e_support import AGENT_COMMAND, checked_agent_process
from fake_llm import FakeLLM

pytestmark = [pytest.mark.e2e]

HANG_GUARD = 30.0
QUESTION = {"question": "Which database?", "choices": ["Postgres", "SQLite"]}
ASK_ECHO = f"Pick one\n@tool ask_user {json.dumps(QUESTION)}"


class AskedClient:
    """An editor that shows forms: records each question and answers with `answer`."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[str, Any, dict[str, Any]]] = []
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.asked.append((message, mode, kwargs))
        return self.answer

    def text(self) -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if isinstance(u, AgentMessageChunk) and u.content.type == "text"
        )


def echo_env(tmp_path: Path) -> dict[str, str]:
    """No key, no config: the offline echo provider answers."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "PATH": os.environ.get("PATH", os.defpath),
    }


async def ask(tmp_path: Path, answer: Any, *, elicitation: bool = True) -> tuple[Any, AskedClient]:
    client = AskedClient(answer)
    capabilities = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
        if elicitation
        else None,
    )
    with (tmp_path / "agent-stderr.log").open("ab") as stderr:
        async with checked_agent_process(
            client,
            *AGENT_COMMAND,
            env=echo_env(tmp_path),
            cwd=tmp_path,
            transport_kwargs={"stderr": stderr},
            use_unstable_protocol=True,
        ) as (conn, _process):
            await asyncio.wait_for(
                conn.initialize(
                    protocol_version=1,
                    client_capabilities=capabilities,
                    client_info=Implementation(name="e2e-ask-user", version="0"),
                ),
                HANG_GUARD,
            )
            session = await asyncio.wait_for(
                conn.new_session(cwd=str(tmp_path), mcp_servers=[]), HANG_GUARD
            )
            reply = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block(ASK_ECHO)]),
                HANG_GUARD,
            )
    return reply, client


def ask_user_calls(client: AskedClient) -> tuple[ToolCallStart, list[ToolCallProgress]]:
    [start] = [u for u in client.updates if isinstance(u, ToolCallStart)]
    progress = [
        u
        for u in client.updates
        if isinstance(u, ToolCallProgress) and u.tool_call_id == start.tool_call_id
    ]
    return start, progress


@pytest.mark.anyio
async def test_an_accepted_form_gives_the_model_the_answer(tmp_path: Path) -> None:
    reply, client = await ask(
        tmp_path, AcceptElicitationResponse(action="accept", content={"choice": "SQLite"})
    )

    assert reply.stop_reason == "end_turn"
    [(message, mode, _)] = client.asked
    assert message == "Which database?"
    assert isinstance(mode, ElicitationFormSessionMode)
    assert mode.requested_schema.required == ["choice"]
    start, progress = ask_user_calls(client)
    assert start.title == "Ask: Which database?"
    assert mode.tool_call_id == start.tool_call_id
    assert progress[-1].status == "completed"
    assert 'The user answered: {"choice": "SQLite"}' in client.text()


@pytest.mark.anyio
async def test_a_declined_form_is_told_to_the_model(tmp_path: Path) -> None:
    reply, client = await ask(tmp_path, DeclineElicitationResponse(action="decline"))
    assert reply.stop_reason == "end_turn"
    assert "The user declined to answer." in client.text()


@pytest.mark.anyio
async def test_a_dismissed_form_ends_the_turn_cancelled(tmp_path: Path) -> None:
    reply, client = await ask(tmp_path, CancelElicitationResponse(action="cancel"))
    assert reply.stop_reason == "cancelled"
    _, progress = ask_user_calls(client)
    assert progress[-1].status == "failed"


@pytest.mark.anyio
async def test_without_form_elicitation_there_is_no_such_tool(tmp_path: Path) -> None:
    reply, client = await ask(tmp_path, None, elicitation=False)
    assert reply.stop_reason == "end_turn"
    assert client.asked == []
    assert "There is no tool named 'ask_user'" in client.text()


# --- acpx ------------------------------------------------------------------------------------


@needs_acpx
def test_acpx_advertises_no_elicitation_so_the_model_gets_no_ask_user(
    fake_llm: FakeLLM, agent_env: dict[str, str], workspace: Path
) -> None:
    prompt = f"Pick one [[tool ask_user {json.dumps(QUESTION)}]]"
    result = run_acpx(agent_env, workspace, "exec", prompt)
    assert result.returncode == 0, result.stderr
    messages = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]

    [initialize] = [m for m in messages if m.get("method") == "initialize"]
    assert "elicitation" not in initialize["params"]["clientCapabilities"]
    [answer] = [m for m in messages if m.get("id") == initialize["id"] and "result" in m][:1]
    methods = answer["result"]["authMethods"]
    assert [m["id"] for m in methods] == ["acp-agent-config"], "acpx runs no login terminal"
    assert answer["result"]["agentCapabilities"]["auth"] == {"logout": {}, "status": {}}
    first, second = fake_llm.requests
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert "ask_user" not in names and "read_file" in names
    assert not [m for m in messages if m.get("method") == "elicitation/create"]
    assert "There is no tool named 'ask_user'" in json.dumps(second["messages"][-1])
