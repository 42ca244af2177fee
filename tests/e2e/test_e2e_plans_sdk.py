"""Plan operations over the real protocol: the `agent-client-protocol` package's own client
drives `python -m acp_agent`; the fake LLM scripts the `plan` tool calls.

A client that advertises `clientCapabilities.plan` sees `plan_update` with one stable id and
`plan_removed` (also when the session is loaded again); one that does not sees the legacy
`plan` update.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import (
    AgentPlanContentUpdate,
    AgentPlanRemovedUpdate,
    AgentPlanUpdate,
    ClientCapabilities,
    FileSystemCapabilities,
    PlanCapabilities,
)
from e2e_support import prompt_text, sdk_agent, tool
from fake_llm import FakeLLM

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HANG_GUARD = 15.0
FIRST = [{"content": "Read the code", "priority": "high", "status": "in_progress"}]
SECOND = [
    {"content": "Read the code", "priority": "high", "status": "completed"},
    {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
]


class PlanClient:
    """An editor stand-in that keeps every session update; it offers no fs or terminal."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")

    def plans(self) -> list[Any]:
        kinds = (AgentPlanContentUpdate, AgentPlanRemovedUpdate, AgentPlanUpdate)
        return [u for u in self.updates if isinstance(u, kinds)]


@asynccontextmanager
async def running_agent(
    env: dict[str, str], stderr_path: Path, cwd: Path, *, plan: bool
) -> AsyncIterator[tuple[Any, PlanClient]]:
    client = PlanClient()
    capabilities = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
        terminal=False,
        plan=PlanCapabilities() if plan else None,
    )
    async with sdk_agent(
        client,
        env,
        stderr_path,
        cwd,
        name="e2e-plans",
        capabilities=capabilities,
        hang_guard=HANG_GUARD,
    ) as (conn, _, _):
        yield conn, client


async def say(conn: Any, session_id: str, text: str) -> None:
    result = await prompt_text(conn, session_id, text, HANG_GUARD)
    assert result.stop_reason == "end_turn"


async def plan_twice_then_clear(conn: Any, cwd: Path) -> str:
    session = await asyncio.wait_for(conn.new_session(cwd=str(cwd), mcp_servers=[]), HANG_GUARD)
    for entries in (FIRST, SECOND, []):
        await say(conn, session.session_id, tool("plan", entries=entries))
    return str(session.session_id)


def dumped(update: Any) -> dict[str, Any]:
    value: dict[str, Any] = update.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


async def test_a_plan_client_gets_one_stable_plan_id_then_plan_removed_also_on_load(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace, plan=True) as (conn, client):
        session_id = await plan_twice_then_clear(conn, workspace)

    first, second, removed = [dumped(u) for u in client.plans()]
    assert first["sessionUpdate"] == second["sessionUpdate"] == "plan_update"
    assert (first["plan"]["type"], first["plan"]["entries"]) == ("items", FIRST)
    assert (second["plan"]["type"], second["plan"]["entries"]) == ("items", SECOND)
    plan_id = first["plan"]["planId"]
    assert second["plan"]["planId"] == plan_id
    assert removed == {"sessionUpdate": "plan_removed", "planId": plan_id}

    # A new agent process replays the session file in the form this client asked for.
    async with running_agent(agent_env, agent_stderr, workspace, plan=True) as (conn, client):
        await asyncio.wait_for(
            conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[]),
            HANG_GUARD,
        )
        replayed = [dumped(u) for u in client.plans()]

    assert replayed == [first, second, removed]


async def test_a_client_without_the_plan_capability_keeps_the_legacy_plan_update(
    fake_llm: FakeLLM, agent_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    async with running_agent(agent_env, agent_stderr, workspace, plan=False) as (conn, client):
        session_id = await plan_twice_then_clear(conn, workspace)
        await asyncio.wait_for(
            conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[]),
            HANG_GUARD,
        )

    plans = client.plans()
    assert all(isinstance(u, AgentPlanUpdate) for u in plans)
    entries = [dumped(u)["entries"] for u in plans]
    assert entries == [FIRST, SECOND, [], FIRST, SECOND, []]  # live, then the replay
