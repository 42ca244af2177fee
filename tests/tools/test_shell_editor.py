"""shell through the client's terminals (a scripted fake editor)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import pytest
from tool_fakes import Events, FakeEditor, ScriptedTerminal, make_context

from acp_agent.messages import TerminalContent, TextPart, ToolCallUpdated
from acp_agent.tools import ToolFailed
from acp_agent.tools.base import TerminalExit
from acp_agent.tools.shell import (
    MODEL_HEAD_CHARS,
    MODEL_TAIL_CHARS,
    OUTPUT_BYTE_LIMIT,
    Shell,
    ShellParams,
)

pytestmark = pytest.mark.anyio

TOOL = Shell()


async def test_the_command_runs_under_bash_in_an_editor_terminal_shown_live(
    root: Path, events: Events
) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(output="ok\n", exit_code=0)])

    outcome = await TOOL.run(
        ShellParams(command="ls | wc -l"), make_context(root, editor, events=events)
    )

    terminal = editor.terminals["term-1"]
    assert (terminal.command, terminal.args, terminal.cwd) == (
        "bash",
        ["-c", "ls | wc -l"],
        str(root),
    )
    assert terminal.output_byte_limit == OUTPUT_BYTE_LIMIT
    assert terminal.env["GIT_PAGER"] == "cat"
    # The first thing the user sees is the live terminal in the tool call.
    assert events.items[0] == ToolCallUpdated(
        "call-1", status="in_progress", content=(TerminalContent("term-1"),)
    )
    assert outcome.display == (TerminalContent("term-1"),)
    assert outcome.model_text == "ok\n\n[exit code 0]"
    assert not outcome.failed
    assert outcome.raw_output == {
        "exit_code": 0,
        "signal": None,
        "timed_out": False,
        "output_truncated": False,
    }
    assert editor.terminal_calls() == ["create", "wait", "output", "release"]


async def test_a_non_zero_exit_fails_the_call_on_screen_with_its_code_but_is_a_normal_result(
    root: Path,
) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(output="boom\r\n", exit_code=2)])

    outcome = await TOOL.run(ShellParams(command="false"), make_context(root, editor))

    assert outcome.model_text == "boom\n\n[exit code 2]"
    assert outcome.failed
    assert outcome.display == (TerminalContent("term-1"), TextPart("Exited with code 2."))
    assert outcome.raw_output is not None and outcome.raw_output["exit_code"] == 2


async def test_a_signal_and_an_empty_output_are_reported(root: Path) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(exit_code=None, signal="SIGSEGV")])

    outcome = await TOOL.run(ShellParams(command="./crash"), make_context(root, editor))

    assert outcome.model_text == "(no output)\n\n[ended by signal SIGSEGV]"
    assert outcome.failed
    assert outcome.display[-1] == TextPart("Ended by signal SIGSEGV.")
    assert outcome.raw_output == {
        "exit_code": None,
        "signal": "SIGSEGV",
        "timed_out": False,
        "output_truncated": False,
    }


async def test_output_the_editor_truncated_is_flagged(root: Path) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(output="tail end\n", truncated=True)])

    outcome = await TOOL.run(ShellParams(command="make"), make_context(root, editor))

    assert "[output truncated: the editor kept only the last 64 KiB of the output]" in (
        outcome.model_text
    )


async def test_long_output_keeps_its_head_and_tail_for_the_model(root: Path) -> None:
    output = "H" * MODEL_HEAD_CHARS + "M" * 5000 + "T" * MODEL_TAIL_CHARS
    editor = FakeEditor(terminals=[ScriptedTerminal(output=output)])

    outcome = await TOOL.run(ShellParams(command="cat big"), make_context(root, editor))

    text = outcome.model_text
    assert text.startswith("H" * MODEL_HEAD_CHARS + "\n[... 5000 characters omitted ...]\n")
    assert "M" not in text.replace("omitted", "")
    assert "T" * MODEL_TAIL_CHARS in text
    assert "5000 characters from the middle were left out" in text


async def test_a_timeout_kills_then_releases_the_terminal(root: Path) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(output="waiting\n", runs_for=math.inf)])

    with anyio.fail_after(5):
        outcome = await TOOL.run(
            ShellParams(command="sleep 100", timeout_seconds=0.1), make_context(root, editor)
        )

    assert editor.terminal_calls() == ["create", "wait", "kill", "wait", "output", "release"]
    assert outcome.model_text == "waiting\n\n[timed out after 0.1 s: the command was stopped]"
    assert outcome.failed
    assert outcome.display[-1] == TextPart("Timed out after 0.1 s: the command was stopped.")
    assert outcome.raw_output is not None and outcome.raw_output["timed_out"] is True


async def test_the_session_default_timeout_applies_without_a_parameter(root: Path) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(runs_for=math.inf)])
    ctx = make_context(root, editor, shell_timeout=0.05)

    with anyio.fail_after(5):
        outcome = await TOOL.run(ShellParams(command="sleep 100"), ctx)

    assert "timed out after 0.05 s" in outcome.model_text


class WatchedWait(FakeEditor):
    """An editor that tells when the agent starts waiting for a terminal to exit."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.waiting = anyio.Event()

    async def wait_for_terminal_exit(self, terminal_id: str) -> TerminalExit:
        self.waiting.set()
        return await super().wait_for_terminal_exit(terminal_id)


async def test_cancellation_kills_and_releases_the_terminal_then_propagates(root: Path) -> None:
    editor = WatchedWait(terminals=[ScriptedTerminal(runs_for=math.inf)])
    finished = False

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:

            async def run() -> None:
                nonlocal finished
                await TOOL.run(ShellParams(command="sleep 100"), make_context(root, editor))
                finished = True

            group.start_soon(run)
            await editor.waiting.wait()
            group.cancel_scope.cancel()

    assert not finished
    assert editor.terminal_calls() == ["create", "wait", "kill", "release"]


async def test_the_terminal_is_released_even_when_waiting_fails(root: Path) -> None:
    editor = FakeEditor(terminals=[ScriptedTerminal(wait_error="connection lost")])

    with pytest.raises(ToolFailed, match="connection lost"):
        await TOOL.run(ShellParams(command="make"), make_context(root, editor))

    assert editor.terminal_calls() == ["create", "wait", "release"]


async def test_a_failing_release_does_not_hide_the_result(root: Path) -> None:
    class BrokenRelease(FakeEditor):
        async def release_terminal(self, terminal_id: str) -> None:
            raise ToolFailed("release refused")

    editor = BrokenRelease(terminals=[ScriptedTerminal(output="fine\n")])

    outcome = await TOOL.run(ShellParams(command="true"), make_context(root, editor))

    assert outcome.model_text == "fine\n\n[exit code 0]"


async def test_cwd_may_be_a_directory_inside_the_roots_only(root: Path, tmp_path: Path) -> None:
    (root / "sub").mkdir()
    editor = FakeEditor()
    ctx = make_context(root, editor)

    await TOOL.run(ShellParams(command="pwd", cwd="sub"), ctx)
    with pytest.raises(ToolFailed, match="outside the workspace"):
        await TOOL.run(ShellParams(command="pwd", cwd=str(tmp_path)), ctx)
    with pytest.raises(ToolFailed, match="outside the workspace"):
        await TOOL.run(ShellParams(command="pwd", cwd="sub/../.."), ctx)

    assert editor.terminals["term-1"].cwd == str(root / "sub")
    assert len(editor.terminals) == 1


def test_the_title_shown_in_the_permission_request_is_the_exact_command(root: Path) -> None:
    command = "git push --force origin main && rm -rf build"
    ctx = make_context(root, FakeEditor())

    assert TOOL.title(ShellParams(command=command), ctx) == command
    assert TOOL.command(ShellParams(command=command)) == command


async def test_a_cancel_while_the_terminal_starts_still_kills_and_releases_it(root: Path) -> None:
    class HeldCreate(FakeEditor):
        """Opens the terminal only once `opening` is set; `asked` tells the call came."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.asked = anyio.Event()
            self.opening = anyio.Event()

        async def create_terminal(self, *args: Any, **kwargs: Any) -> str:
            self.asked.set()
            await self.opening.wait()
            return await super().create_terminal(*args, **kwargs)

    editor = HeldCreate(terminals=[ScriptedTerminal(runs_for=math.inf)])

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(TOOL.run, ShellParams(command="sleep 100"), make_context(root, editor))
            await editor.asked.wait()
            group.cancel_scope.cancel()
            editor.opening.set()  # the terminal opens after the cancel

    assert editor.terminal_calls() == ["create", "kill", "release"]


async def test_the_preview_is_the_command_line_and_where_it_runs(root: Path) -> None:
    (root / "sub").mkdir()
    ctx = make_context(root, FakeEditor())

    plain = await TOOL.preview(ShellParams(command="make test"), ctx)
    elsewhere = await TOOL.preview(ShellParams(command="ls", cwd="sub"), ctx)

    assert plain == (TextPart("```sh\nmake test\n```"),)
    assert elsewhere == (TextPart(f"in {root / 'sub'}\n```sh\nls\n```"),)
    assert ctx.editor.calls == [], "a preview runs nothing"  # type: ignore[attr-defined]
