"""Titles written by a `title_model`: the first prompt names the session at once, the title
model's few words replace it beside the turn (the prompt's answer never waits for them),
and a session closed or deleted meanwhile stops the title model and gets nothing written.

The session's own model is the offline echo provider; the title model is the fake OpenAI
server, which records what it was asked.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_acp_client import FakeClient
from fake_llm import FakeLLM

from acp_agent.sessions.titles import TITLE_INSTRUCTIONS, cleaned, shortened

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]


def config(tmp_path: Path, fake: FakeLLM, title_model: str = "fake/mini") -> str:
    path = tmp_path / "agent.toml"
    path.write_text(
        f"""
default_model = "offline/echo"
title_model = "{title_model}"
state_dir = "{tmp_path / "state"}"

[providers.offline]
type = "echo"

[providers.fake]
type = "openai-compatible"
base_url = "{fake.base_url}"
api_key = "test-key"

[[providers.fake.models]]
id = "mini"
""",
        encoding="utf-8",
    )
    return str(path)


def own_model_config(tmp_path: Path, titler: FakeLLM, own: FakeLLM) -> str:
    """`config` with the session's model `own/big` on a server of its own."""
    path = Path(config(tmp_path, titler))
    path.write_text(
        path.read_text(encoding="utf-8").replace('"offline/echo"', '"own/big"')
        + f'[providers.own]\ntype = "openai-compatible"\nbase_url = "{own.base_url}"\n'
        'api_key = "test-key"\nmodels = [{id = "big"}]\n',
        encoding="utf-8",
    )
    return str(path)


def titles(client: FakeClient, session_id: str) -> list[str]:
    return [
        u["title"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "session_info_update"
    ]


def is_title_update(frame: dict[str, Any], title_start: str) -> bool:
    update = frame.get("params", {}).get("update", {})
    return update.get("sessionUpdate") == "session_info_update" and str(
        update.get("title", "")
    ).startswith(title_start)


async def test_the_title_model_renames_the_session_after_the_first_prompt(
    connection: Connection, tmp_path: Path
) -> None:
    first = "Please fix the flaky login test in the auth module"
    with FakeLLM() as fake:
        agent_config = config(tmp_path, fake)
        async with connection(agent_config) as client:
            await client.initialize()
            session_id = await client.new_session(tmp_path)
            reply = await client.prompt(session_id, first)
            await client.wait_for(lambda f: is_title_update(f, "Fake reply to"))
            await client.prompt(session_id, "and a second prompt")
            [listed] = (await client.call("session/list", {}))["sessions"]
        [asked] = fake.requests

    assert reply["result"] == {"stopReason": "end_turn"}
    # The first prompt at once, then the model's words (the fake answers "Fake reply to: ...").
    assert titles(client, session_id) == [first, shortened(f"Fake reply to: {first}")]
    assert asked["messages"] == [
        {"role": "system", "content": TITLE_INSTRUCTIONS},
        {"role": "user", "content": first},
    ]
    assert listed["title"] == titles(client, session_id)[-1]

    async with connection(agent_config) as client:
        await client.initialize()
        await client.call(
            "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        )
        assert titles(client, session_id) == [listed["title"]]


async def test_a_failing_title_model_leaves_the_first_prompt_title(
    connection: Connection, tmp_path: Path
) -> None:
    with FakeLLM() as fake:
        async with connection(config(tmp_path, fake)) as client:
            await client.initialize()
            session_id = await client.new_session(tmp_path)
            reply = await client.prompt(session_id, "name this [[status 401]]")
            # The title work ends with the session: after close nothing more can come.
            await client.call("session/close", {"sessionId": session_id})
            [listed] = (await client.call("session/list", {}))["sessions"]

    assert reply["result"] == {"stopReason": "end_turn"}
    assert titles(client, session_id) == ["name this [[status 401]]"]
    assert listed["title"] == "name this [[status 401]]"


async def test_deleting_a_session_stops_its_title_model_and_nothing_is_written_after(
    connection: Connection, tmp_path: Path
) -> None:
    with FakeLLM() as fake:
        async with connection(config(tmp_path, fake)) as client:
            await client.initialize()
            session_id = await client.new_session(tmp_path)
            await client.prompt(session_id, "a slow title [[slow 1]]")
            # The title model was asked (it answers a word a second).
            await anyio.to_thread.run_sync(fake.wait_for, lambda exchanges: exchanges)
            await client.call("session/delete", {"sessionId": session_id})
            hung_up = await anyio.to_thread.run_sync(fake.wait_for_disconnect)
            listed = (await client.call("session/list", {}))["sessions"]

    assert hung_up is not None, "the title request was cancelled"
    assert listed == []
    assert list((tmp_path / "state" / "sessions").glob(f"{session_id}*")) == []
    assert titles(client, session_id) == ["a slow title [[slow 1]]"]


def test_what_a_model_writes_is_cleaned_to_a_plain_title() -> None:
    assert cleaned('"Fix flaky login test."') == "Fix flaky login test"
    assert (
        cleaned("## Title: Refactor the auth module\n\nBecause ...") == "Refactor the auth module"
    )
    assert cleaned("**Speed up CI**") == "Speed up CI"
    assert cleaned("  \n ") is None
    long = cleaned("word " * 40)
    assert long is not None and len(long) <= 60 and long.endswith("…")


async def test_a_title_model_the_editor_disabled_gives_way_to_the_sessions_model(
    connection: Connection, tmp_path: Path
) -> None:
    first = "Please fix the flaky login test in the auth module"
    with FakeLLM() as titler, FakeLLM() as own:
        async with connection(own_model_config(tmp_path, titler, own)) as client:
            await client.initialize()
            assert await client.call("providers/disable", {"providerId": "fake"}) == {}
            session_id = await client.new_session(tmp_path)
            reply = await client.prompt(session_id, first)
            await client.wait_for(lambda f: is_title_update(f, "Fake reply to"))
        asked = own.requests

    assert reply["result"] == {"stopReason": "end_turn"}
    assert not titler.requests  # never sent to: the editor turned its provider off
    assert TITLE_INSTRUCTIONS in [r["messages"][0]["content"] for r in asked]
    assert {r["model"] for r in asked} == {"big"}
