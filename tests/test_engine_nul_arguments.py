"""A NUL byte in a tool argument fails that tool call only: the model reads why, the turn
goes on. Paths and commands cannot hold one (the OS raises `ValueError: embedded null byte`
deep inside a tool), so the built-in tools refuse it when their arguments are read; and
whatever a tool's paths, title or the permission policy raise fails the call, not the turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from test_engine import Choices, Host, ScriptedProvider, call, make_turn, user

from acp_agent.messages import Stop, TextDelta, ToolCallUpdated, ToolResultPart
from acp_agent.tools import Tool, ToolContext, ToolOutcome, ToolParams, builtin_tools
from acp_agent.tools.permissions import PermissionMode

pytestmark = pytest.mark.anyio

NUL = "a\x00b"

# Every string argument of every built-in tool, each in a call that is otherwise valid.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": NUL}),
    ("write_file", {"path": NUL, "content": "x"}),
    ("write_file", {"path": "new.txt", "content": NUL}),
    ("edit_file", {"path": NUL, "old_text": "hello", "new_text": "bye"}),
    ("edit_file", {"path": "note.txt", "old_text": NUL, "new_text": "bye"}),
    ("edit_file", {"path": "note.txt", "old_text": "hello", "new_text": NUL}),
    ("edit_file", {"path": "note.txt", "edits": [{"old_text": NUL, "new_text": "bye"}]}),
    ("edit_file", {"path": "note.txt", "edits": [{"old_text": "hello", "new_text": NUL}]}),
    ("search", {"glob": NUL}),
    ("search", {"grep": NUL}),
    ("search", {"glob": "*.txt", "path": NUL}),
    ("shell", {"command": f"echo {NUL}"}),
    ("shell", {"command": "echo hi", "cwd": NUL}),
    ("plan", {"entries": [{"content": NUL}]}),
    ("ask_user", {"question": NUL}),
    ("ask_user", {"question": "Which?", "choices": ["one", NUL]}),
    ("ask_user", {"question": "Which?", "fields": [{"name": "db", "label": NUL}]}),
    ("ask_user", {"question": "Which?", "fields": [{"name": "db", "description": NUL}]}),
    ("ask_user", {"question": "Which?", "fields": [{"name": "db", "options": [NUL]}]}),
]


def nul_path(arguments: dict[str, Any]) -> str:
    """Where the NUL sits, as the refusal names it (`edits.0.old_text`)."""
    for key, value in arguments.items():
        if isinstance(value, str) and "\x00" in value:
            return key
        if isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, str) and "\x00" in item:
                    return f"{key}.{index}"
                if isinstance(item, dict):
                    inner = nul_path(item)
                    if inner:
                        return f"{key}.{index}.{inner}"
    return ""


@pytest.mark.parametrize(("name", "arguments"), CALLS, ids=lambda v: str(v)[:40])
@pytest.mark.parametrize("mode", ["ask", "bypass"])
async def test_a_nul_in_a_builtin_tools_argument_fails_that_call_and_the_turn_goes_on(
    tmp_path: Path, name: str, arguments: dict[str, Any], mode: PermissionMode
) -> None:
    (tmp_path / "note.txt").write_text("hello\n", encoding="utf-8")
    provider = ScriptedProvider(
        [call("c1", name, **arguments), call("c2", "add", a=1, b=2), Stop("tool_use")],
        [TextDelta("done"), Stop("end_turn")],
    )
    host = Host()
    builtin = list(builtin_tools(ask_user=True).values())
    turn = make_turn(provider, host, tmp_path, choices=Choices(provider, mode), extra_tools=builtin)

    assert await turn.run(user("go")) == "end_turn"

    failed, added = provider.requests[1].messages[-1].parts
    assert isinstance(failed, ToolResultPart) and failed.is_error
    assert failed.content[0].text == (  # type: ignore[union-attr]
        f"Invalid arguments for {name}: arguments: Value error, "
        f"{nul_path(arguments)} contains a NUL byte (\\x00)"
    )
    assert isinstance(added, ToolResultPart) and not added.is_error
    shown = [e for e in host.events if isinstance(e, ToolCallUpdated) and e.id == "c1"]
    assert shown[-1].status == "failed"
    assert host.questions == []  # refused before anyone is asked
    assert (tmp_path / "note.txt").read_text(encoding="utf-8") == "hello\n"
    assert [p.name async for p in anyio.Path(tmp_path).iterdir()] == ["note.txt"]


class PathsParams(ToolParams):
    path: str


class BrokenPaths(Tool[PathsParams]):
    """A tool whose `paths` raises, as `Path.resolve` does on input the OS refuses."""

    name = "broken_paths"
    kind = "edit"
    description = "Its paths raise."
    params_model = PathsParams
    read_only = False
    ran = False

    def paths(self, params: PathsParams, ctx: ToolContext) -> tuple[Path, ...]:
        raise ValueError("embedded null byte")

    async def run(self, params: PathsParams, ctx: ToolContext) -> ToolOutcome:
        raise AssertionError("not run")


@pytest.mark.parametrize("mode", ["ask", "accept-edits", "bypass"])
async def test_an_exception_in_a_tools_paths_fails_that_call_and_the_turn_goes_on(
    tmp_path: Path, mode: PermissionMode
) -> None:
    provider = ScriptedProvider(
        [call("c1", "broken_paths", path="x"), call("c2", "add", a=1, b=2), Stop("tool_use")],
        [TextDelta("done"), Stop("end_turn")],
    )
    host = Host()
    choices = Choices(provider, mode)
    turn = make_turn(provider, host, tmp_path, choices=choices, extra_tools=[BrokenPaths()])

    assert await turn.run(user("go")) == "end_turn"

    failed, added = provider.requests[1].messages[-1].parts
    assert isinstance(failed, ToolResultPart) and failed.is_error
    assert failed.content[0].text == (  # type: ignore[union-attr]
        "broken_paths failed: ValueError: embedded null byte"
    )
    assert isinstance(added, ToolResultPart) and added.content[0].text == "3"  # type: ignore[union-attr]
    assert host.questions == []
    shown = [e for e in host.events if isinstance(e, ToolCallUpdated) and e.id == "c1"]
    assert shown[-1].status == "failed"


def test_the_same_arguments_without_a_nul_are_accepted() -> None:
    tools = builtin_tools(ask_user=True)
    for name, arguments in CALLS:
        clean = _without_nul(arguments)
        tools[name].params_model.model_validate(clean)


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {k: _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value
