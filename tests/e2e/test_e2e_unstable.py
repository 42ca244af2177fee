"""The cheap unstable methods end to end: `session/set_title`, `session/archive` (and the
list's `archived` filter), `session/status`, `auth/status` with `auth/status_update`, and
`session/fork` with initial `configOptions`, each against `python -m acp_agent` run twice
on one state directory (titles and archives must survive the restart).

v1 is driven by the `agent-client-protocol` package's client (it has no typed calls for
these, so they go through its JSON-RPC connection); v2 by the npm SDK's v2 client
(`v2_client.mjs`, its generic `script` scenario). Every frame the agent sent is validated
against the unstable schema of the dialect spoken (`schema_support.assert_frames_from_agent`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import ClientCapabilities, SessionInfoUpdate
from e2e_support import needs_v2_sdk, prompt_text, run_v2_driver, sdk_agent
from schema_support import assert_frames_from_agent
from test_e2e_plans_sdk import PlanClient  # an editor that keeps updates, no fs or terminal

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HANG_GUARD = 30.0


@pytest.fixture
def state_env(agent_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The agent's env with its state dir in the test's directory, shared by both runs."""
    return {**agent_env, "XDG_STATE_HOME": str(tmp_path / "state")}


class Wire:
    """Every frame of one SDK connection, as the SDK's observer sees it."""

    def __init__(self, conn: Any) -> None:
        self.received: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self._conn = conn._conn  # the SDK's JSON-RPC connection under the typed calls
        self._conn.add_observer(self._observe)

    def _observe(self, event: Any) -> None:
        kept = self.received if event.direction.value == "incoming" else self.sent
        kept.append(event.message)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        return await asyncio.wait_for(self._conn.send_request(method, params), HANG_GUARD)

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [f["params"] for f in self.received if f.get("method") == method]


async def test_the_sdk_client_titles_archives_forks_and_asks_statuses_across_a_restart(
    state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    client = PlanClient()
    async with sdk_agent(
        client,
        state_env,
        agent_stderr,
        workspace,
        name="unstable-e2e",
        capabilities=ClientCapabilities(),
        hang_guard=HANG_GUARD,
    ) as (conn, _, _):
        # The SDK's typed answer drops the unstable capabilities (the protocol tests and
        # the v2 run below check them on the wire).
        wire = Wire(conn)
        titled = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await prompt_text(conn, titled, "fix the login bug", HANG_GUARD)
        title = await wire.call("session/set_title", {"sessionId": titled, "title": "Login fix"})
        archived = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await prompt_text(conn, archived, "old work", HANG_GUARD)
        await wire.call("session/archive", {"sessionId": archived})
        statuses = [
            await wire.call("session/status", {"sessionId": sid}) for sid in (titled, archived)
        ]
        auth = await wire.call("auth/status", {})
        forked = await wire.call(
            "session/fork",
            {
                "sessionId": titled,
                "cwd": str(workspace),
                "configOptions": [{"configId": "mode", "value": "read-only"}],
            },
        )
        with pytest.raises(RequestError) as refused:
            await wire.call(
                "session/fork",
                {
                    "sessionId": titled,
                    "cwd": str(workspace),
                    "configOptions": [{"configId": "mode", "value": "yolo"}],
                },
            )
        await conn.authenticate(method_id="acp-agent-config")
        await wire.call("auth/status", {})  # after the login's follow-up
        first_run = wire

    assert title == {"title": "Login fix"}
    shown = [u.title for u in client.updates if isinstance(u, SessionInfoUpdate)]
    assert shown.index("fix the login bug") < shown.index("Login fix")
    assert statuses == [{"status": "open"}, {"status": "saved"}]
    assert auth == {
        "state": "authenticated",
        "accounts": [{"label": "openai API key", "active": True}],
    }
    mode = next(o for o in forked["configOptions"] if o["id"] == "mode")
    assert mode["currentValue"] == "read-only"
    assert refused.value.code == -32602 and "mode" in str(refused.value)
    assert first_run.notifications("auth/status_update") == [auth]  # the first told
    assert_frames_from_agent("v1", first_run.received, first_run.sent)

    async with sdk_agent(
        PlanClient(),
        state_env,
        agent_stderr,
        workspace,
        name="unstable-e2e-again",
        capabilities=ClientCapabilities(),
        hang_guard=HANG_GUARD,
    ) as (conn, _, _):
        wire = Wire(conn)
        default = await wire.call("session/list", {})
        only = await wire.call("session/list", {"archived": "only"})
        await wire.call("session/unarchive", {"sessionId": archived})
        everything = await wire.call("session/list", {"archived": "include"})

    listed = {s["sessionId"]: s for s in default["sessions"]}
    assert listed[titled]["title"] == "Login fix"
    assert archived not in listed and forked["sessionId"] in listed
    assert [s["sessionId"] for s in only["sessions"]] == [archived]
    assert all(s["archived"] is False for s in everything["sessions"])
    assert len(everything["sessions"]) == 3
    assert_frames_from_agent("v1", wire.received, wire.sent)


def _v2_script(*steps: dict[str, Any]) -> str:
    return json.dumps({"steps": list(steps)})


def _turn(session: str, text: str) -> dict[str, Any]:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    return {"op": "turn", "params": params}


def _request(name: str, method: str, **params: Any) -> dict[str, Any]:
    return {"op": "request", "as": name, "method": method, "params": params}


async def _run_v2(env: dict[str, str], stderr: Path, cwd: Path, script: str) -> list[Any]:
    out = await asyncio.wait_for(
        run_v2_driver(env, stderr, cwd, "script", V2_SCRIPT=script), HANG_GUARD * 2
    )
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def _steps(lines: list[Any]) -> dict[str, Any]:
    return {line["step"]: line for line in lines if "step" in line}


def _frames(lines: list[Any], direction: str) -> list[dict[str, Any]]:
    return [line[direction] for line in lines if direction in line]


@needs_v2_sdk
async def test_the_npm_v2_client_titles_archives_forks_and_asks_statuses_across_a_restart(
    state_env: dict[str, str], agent_stderr: Path, workspace: Path
) -> None:
    cwd = str(workspace)
    first = await _run_v2(
        state_env,
        agent_stderr,
        workspace,
        _v2_script(
            _request("titled", "session/new", cwd=cwd),
            _turn("$titled.sessionId", "fix the login bug"),
            _request(
                "title", "session/set_title", sessionId="$titled.sessionId", title="Login fix"
            ),
            _request("status", "session/status", sessionId="$titled.sessionId"),
            _request("archived", "session/new", cwd=cwd),
            _turn("$archived.sessionId", "old work"),
            _request("archive", "session/archive", sessionId="$archived.sessionId"),
            _request("auth", "auth/status"),
            _request(
                "fork",
                "session/fork",
                sessionId="$titled.sessionId",
                cwd=cwd,
                configOptions=[{"configId": "mode", "value": "read-only"}],
            ),
            _request(
                "badFork",
                "session/fork",
                sessionId="$titled.sessionId",
                cwd=cwd,
                configOptions=[{"configId": "colour", "value": "blue"}],
            ),
            _request("logout", "auth/logout"),
            {"op": "until", "match": {"method": "auth/status_update"}},
        ),
    )
    got = _steps(first)
    titled = got["titled"]["result"]["sessionId"]
    archived = got["archived"]["result"]["sessionId"]

    # As it crossed the wire: the SDK's typed answer keeps only its stable fields.
    [initialized] = [
        f["result"]["capabilities"]
        for f in _frames(first, "in")
        if "protocolVersion" in f.get("result", {})
    ]
    assert {name: initialized["session"][name] for name in ("title", "archive", "status")} == {
        "title": {},
        "archive": {},
        "status": {},
    }
    assert initialized["auth"] == {"status": {}}
    assert got["title"]["result"] == {"title": "Login fix"}
    assert got["status"]["result"] == {
        "status": "open",
        "state": {"state": "idle", "background": []},
    }
    assert got["archive"]["result"] == {}
    assert got["auth"]["result"]["state"] == "authenticated"
    mode = next(o for o in got["fork"]["result"]["configOptions"] if o["configId"] == "mode")
    assert mode["currentValue"] == "read-only"
    assert got["badFork"]["error"]["code"] == -32602
    assert "colour" in got["badFork"]["error"]["message"]
    [told] = [f["params"] for f in _frames(first, "in") if f.get("method") == "auth/status_update"]
    assert told["state"] == "authenticated"  # the environment's key stays after a logout
    received, sent = _frames(first, "in"), _frames(first, "out")
    assert_frames_from_agent("v2", received, sent)

    again = await _run_v2(
        state_env,
        agent_stderr,
        workspace,
        _v2_script(
            _request("default", "session/list"),
            _request("only", "session/list", archived="only"),
            _request("statusSaved", "session/status", sessionId=titled),
        ),
    )
    got = _steps(again)
    listed = {s["sessionId"]: s for s in got["default"]["result"]["sessions"]}
    assert listed[titled]["title"] == "Login fix"
    assert archived not in listed
    assert [s["sessionId"] for s in got["only"]["result"]["sessions"]] == [archived]
    assert got["statusSaved"]["result"] == {"status": "saved"}
    assert_frames_from_agent("v2", _frames(again, "in"), _frames(again, "out"))
