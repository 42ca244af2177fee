"""Our slash commands over the wire (`/model`, `/mode`, `/help`): listed with descriptions
and input hints, usage errors answered as a reply that ends the turn, and every mode change
told as `current_mode_update` (clients that know only modes: Toad) and as config options."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp.schema import SessionNotification
from fake_acp_client import FakeClient

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

CONFIG = """
default_model = "fast/echo"

[providers.fast]
type = "echo"
models = [{ id = "echo" }]

[providers.deep]
type = "echo"
models = [{ id = "thinker", reasoning = true }]
"""


@pytest.fixture
def config_file(tmp_path: Path) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return str(path)


def updates_after(client: FakeClient, session_id: str, start: int) -> list[dict[str, Any]]:
    return [
        f["params"]["update"]
        for f in client.frames[start:]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
    ]


def reply_text(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [u["sessionUpdate"] for u in updates]


def current(options: list[dict[str, Any]], option_id: str) -> str:
    value: str = next(o for o in options if o["id"] == option_id)["currentValue"]
    return value


def assert_valid(client: FakeClient) -> None:
    for frame in client.frames:
        if frame.get("method") == "session/update":
            SessionNotification.model_validate(frame["params"])


async def command(
    client: FakeClient, session_id: str, text: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The prompt's answer, and the session's updates sent before it."""
    start = len(client.frames)
    answer = await client.prompt(session_id, text)
    answer_at = client.frames.index(answer)
    return answer, updates_after(client, session_id, start)[: answer_at - start]


async def started(client: FakeClient, tmp_path: Path) -> str:
    await client.initialize()
    session_id = await client.new_session(tmp_path)
    await client.wait_for(
        lambda f: (
            f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "available_commands_update"
        )
    )
    return session_id


async def test_commands_are_listed_with_descriptions_and_input_hints(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await started(client, tmp_path)
    [update] = [
        u for u in client.updates(session_id) if u["sessionUpdate"] == "available_commands_update"
    ]
    commands = {c["name"]: c for c in update["availableCommands"]}
    assert {"model", "mode", "help", "mcp", "compact"} <= set(commands)
    assert all(c["description"] for c in commands.values())
    assert commands["model"]["input"] == {"hint": "provider/model"}
    assert commands["mode"]["input"] == {"hint": "ask | accept-edits | bypass | read-only"}
    assert "input" not in commands["help"]
    assert_valid(client)


async def test_model_with_an_unknown_id_is_answered_with_the_models_and_ends_the_turn(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await started(client, tmp_path)
        answer, updates = await command(client, session_id, "/model nope")
        after = await client.call(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "mode", "value": "ask"},
        )

    assert answer["result"] == {"stopReason": "end_turn"}
    text = reply_text(updates)
    assert text.startswith("There is no model 'nope'.")
    assert "- fast/echo  (current)" in text and "- deep/thinker" in text
    assert kinds(updates) == ["agent_message_chunk"]  # no option changed
    assert current(after["configOptions"], "model") == "fast/echo"


async def test_mode_without_an_argument_lists_the_modes_with_the_current_one(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await started(client, tmp_path)
        answer, updates = await command(client, session_id, "/mode")

    assert answer["result"] == {"stopReason": "end_turn"}
    text = reply_text(updates)
    assert "- ask: Ask before every edit and command.  (current)" in text
    assert "- read-only: " in text and "Switch with /mode id." in text
    assert kinds(updates) == ["agent_message_chunk"]


async def test_mode_switches_and_tells_mode_clients_and_config_option_clients(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await started(client, tmp_path)
        answer, updates = await command(client, session_id, "/mode read-only")
        # The switch holds: a write is refused from now on.
        write = await client.prompt(
            session_id, f'@tool write_file {{"path": "{tmp_path / "x.txt"}", "content": "x"}}'
        )

    assert answer["result"] == {"stopReason": "end_turn"}
    assert reply_text(updates) == "Mode set to Read only (read-only)."
    assert kinds(updates) == ["agent_message_chunk", "current_mode_update", "config_option_update"]
    assert updates[1]["currentModeId"] == "read-only"
    assert current(updates[2]["configOptions"], "mode") == "read-only"
    assert write["result"]["stopReason"] == "end_turn"
    assert not (tmp_path / "x.txt").exists()
    assert_valid(client)


async def test_mode_with_an_unknown_id_is_answered_with_the_modes_and_changes_nothing(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await started(client, tmp_path)
        answer, updates = await command(client, session_id, "/mode sideways")

    assert answer["result"] == {"stopReason": "end_turn"}
    assert reply_text(updates).startswith("There is no mode 'sideways'.\n\nModes:\n")
    assert kinds(updates) == ["agent_message_chunk"]


async def test_help_lists_every_command_with_its_description(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await started(client, tmp_path)
        answer, updates = await command(client, session_id, "/help")

    assert answer["result"] == {"stopReason": "end_turn"}
    lines = reply_text(updates).splitlines()
    assert lines[0] == "Commands:"
    assert "- /model provider/model: Switch the model (no argument: list the models)" in lines
    assert any(
        line.startswith("- /mode ask | accept-edits | bypass | read-only: ") for line in lines
    )
    assert "- /help: List the commands" in lines
    assert any(line.startswith("- /compact [focus]: Summarise") for line in lines)
    assert any(line.startswith("- /think off | low | medium | high: Set how") for line in lines)
    assert any(line.startswith("- /mcp: ") for line in lines)


async def test_every_route_to_a_mode_change_sends_current_mode_update(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    async with connection(config_file) as client:
        session_id = await started(client, tmp_path)

        start = len(client.frames)
        answer = await client.call(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "mode", "value": "accept-edits"},
        )
        by_option = updates_after(client, session_id, start)

        start = len(client.frames)
        await client.call("session/set_mode", {"sessionId": session_id, "modeId": "bypass"})
        by_set_mode = updates_after(client, session_id, start)

        _, by_command = await command(client, session_id, "/mode ask")

    # The answer to set_config_option carries the options; clients of modes get the update.
    assert current(answer["configOptions"], "mode") == "accept-edits"
    assert by_option == [{"sessionUpdate": "current_mode_update", "currentModeId": "accept-edits"}]
    assert kinds(by_set_mode) == ["current_mode_update", "config_option_update"]
    assert by_set_mode[0]["currentModeId"] == "bypass"
    assert current(by_set_mode[1]["configOptions"], "mode") == "bypass"
    assert [u.get("currentModeId") for u in by_command if "currentModeId" in u] == ["ask"]
    assert_valid(client)


async def test_think_sets_the_thought_level_for_clients_without_a_config_option_picker(
    connection: Connection, config_file: str, tmp_path: Path
) -> None:
    """Toad shows no config options: `/think LEVEL` is its way to the thought level."""
    async with connection(config_file) as client:
        session_id = await started(client, tmp_path)
        _, plain = await command(client, session_id, "/think high")
        await command(client, session_id, "/model deep/thinker")
        _, listing = await command(client, session_id, "/think")
        answer, switched = await command(client, session_id, "/think high")
        _, unknown = await command(client, session_id, "/think extreme")
        assert_valid(client)

    assert reply_text(plain) == "fast/echo does not reason: it has no thought levels."
    assert reply_text(listing).startswith("Thought levels:\n- off\n")
    assert "Set one with /think level." in reply_text(listing)
    assert answer["result"] == {"stopReason": "end_turn"}
    assert reply_text(switched) == "Thought level set to high."
    [update] = [u for u in switched if u["sessionUpdate"] == "config_option_update"]
    assert current(update["configOptions"], "thought_level") == "high"
    assert reply_text(unknown).startswith("There is no thought level 'extreme'.")
    assert "- high  (current)" in reply_text(unknown)
