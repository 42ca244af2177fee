"""One writer per session, across real agent processes: while one `acp-agent` has a session
open, another cannot load or resume it (the error names the holder), yet lists it and
forks it; once the first closes it, the second loads it with nothing lost.

Both processes share one state dir (`XDG_STATE_HOME`) and are driven by the
`agent-client-protocol` package's own client against the fake OpenAI server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import UserMessageChunk
from fake_llm import FakeLLM, message_text
from test_e2e_sdk_client import RecordingClient, prompt, running_agent

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HANG_GUARD = 30.0


async def ask(conn: Any, session_id: str, text: str) -> str:
    result = await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=prompt(text)), HANG_GUARD
    )
    return str(result.stop_reason)


def user_texts(client: RecordingClient, session_id: str) -> list[str]:
    return [
        u.content.text
        for u in client.of(session_id)
        if isinstance(u, UserMessageChunk) and u.content.type == "text"
    ]


async def test_a_session_open_in_one_agent_is_refused_by_another_until_it_is_closed(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    env = {**agent_env, "XDG_STATE_HOME": str(workspace.parent / "state")}
    async with running_agent(env, agent_stderr, workspace) as (first, holder, _):
        session_id = (await first.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        assert await ask(first, session_id, "written by the first agent") == "end_turn"

        async with running_agent(env, agent_stderr, workspace) as (second, _, client):
            refusals = []
            with pytest.raises(RequestError) as refused:
                await asyncio.wait_for(
                    second.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[]),
                    HANG_GUARD,
                )
            refusals.append(refused.value)
            with pytest.raises(RequestError) as refused:
                await asyncio.wait_for(
                    second.resume_session(cwd=str(workspace), session_id=session_id), HANG_GUARD
                )
            refusals.append(refused.value)
            listed = await asyncio.wait_for(second.list_sessions(), HANG_GUARD)
            fork = await asyncio.wait_for(
                second.fork_session(session_id=session_id, cwd=str(workspace)), HANG_GUARD
            )
            assert await ask(second, fork.session_id, "asked in the fork") == "end_turn"
            fork_request = fake_llm.requests[-1]["messages"]

            # The first agent writes on, untroubled; then it lets the session go.
            assert await ask(first, session_id, "still the first agent") == "end_turn"
            await asyncio.wait_for(first.close_session(session_id=session_id), HANG_GUARD)

            await asyncio.wait_for(
                second.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[]),
                HANG_GUARD,
            )
            await client.wait_until(lambda: len(user_texts(client, session_id)) >= 2, HANG_GUARD)
            assert await ask(second, session_id, "now the second agent") == "end_turn"
            final_request = fake_llm.requests[-1]["messages"]

    expected = f"is open in another acp-agent (pid {holder.pid}); close it there first"
    for refusal in refusals:
        assert expected in str(refusal), refusal
    assert session_id in {s.session_id for s in listed.sessions}
    assert [message_text(m) for m in fork_request if m["role"] == "user"] == [
        "written by the first agent",
        "asked in the fork",
    ]
    assert user_texts(client, session_id)[:2] == [
        "written by the first agent",
        "still the first agent",
    ]
    assert [message_text(m) for m in final_request if m["role"] == "user"] == [
        "written by the first agent",
        "still the first agent",
        "now the second agent",
    ]
