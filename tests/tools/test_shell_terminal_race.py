"""A terminal whose `terminal/create` answer races a cancel is always killed and released."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from tool_fakes import FakeEditor, ScriptedTerminal, make_context

from acp_agent.tools.shell import Shell, ShellParams

pytestmark = pytest.mark.anyio

TOOL = Shell()


async def run_cancelled_as_the_answer_arrives(root: Path, background: bool) -> FakeEditor:
    """The cancel is delivered in the same step the editor answers `terminal/create`."""
    cancel_scope = anyio.CancelScope()

    class AnswersAsCancelled(FakeEditor):
        async def create_terminal(self, *args: Any, **kwargs: Any) -> str:
            terminal_id = await super().create_terminal(*args, **kwargs)
            cancel_scope.cancel()  # the user pressed stop as the answer came in
            return terminal_id

    editor = AnswersAsCancelled(terminals=[ScriptedTerminal(runs_for=math.inf)])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as connection:
            ctx = make_context(root, editor)
            if background:
                ctx = replace(ctx, background=connection)
            with cancel_scope:
                await TOOL.run(ShellParams(command="sleep 100"), ctx)
    assert cancel_scope.cancelled_caught
    return editor


@pytest.mark.parametrize("background", [True, False], ids=["connection-group", "shielded"])
async def test_a_terminal_created_just_as_the_call_is_cancelled_is_killed_and_released(
    tmp_path: Path, background: bool
) -> None:
    editor = await run_cancelled_as_the_answer_arrives(tmp_path, background)
    [terminal] = editor.terminals.values()
    assert terminal.killed.is_set()
    assert terminal.released
    assert editor.terminal_calls().count("release") == 1
