"""A model stream that drops mid-reply is sent again, and the turn finishes normally."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from acp import RequestError
from fake_llm import FakeLLM, fake_reply
from test_e2e_sdk_client import prompt, running_agent

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


async def test_a_stream_dropped_mid_reply_is_retried_and_the_turn_ends_normally(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        first = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=prompt("[[drop 1]] tell me a story")), 30
        )
        shown = client.text(sid)
        second = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("next")), 30)

    assert first.stop_reason == "end_turn"
    assert second.stop_reason == "end_turn"
    assert [e.outcome for e in fake_llm.exchanges] == ["dropped", "completed", "completed"]
    reply = fake_reply("tell me a story")
    # On screen: the two words before the drop, a notice, then the whole reply.
    before, notice, after = shown.partition("[openai: the reply broke off")
    assert notice and "starts over" in after
    assert before.strip() and reply.startswith(before.strip())
    assert after.endswith("\n\n" + reply)
    # In the model's history: one coherent reply.
    history = fake_llm.requests[-1]["messages"]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "user"]
    assert history[2]["content"] == reply


async def test_a_stream_that_keeps_dropping_fails_the_prompt_after_its_retries(
    fake_llm: FakeLLM,
    agent_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
    tmp_path: Path,
) -> None:
    config = tmp_path / "quick-retries.toml"
    config.write_text(
        f"""
[providers.fake]
type = "openai-compatible"
base_url = "{fake_llm.base_url}"
retry = {{ max_attempts = 3, initial_delay = 0.01, max_delay = 0.02 }}
models = [{{ id = "fake-model" }}]
"""
    )
    env = {**agent_env, "ACP_AGENT_CONFIG": str(config)}
    async with running_agent(env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        with pytest.raises(RequestError) as failure:
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("[[drop]] hi")), 30)
        again = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=prompt("retry")), 30)

    assert failure.value.code == -32603
    assert re.search(r"gave up after 3 attempts", str(failure.value)), str(failure.value)
    assert [e.outcome for e in fake_llm.exchanges][:3] == ["dropped"] * 3
    assert again.stop_reason == "end_turn"
    assert client.text(sid).endswith(fake_reply("retry"))
