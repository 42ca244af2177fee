"""An in-memory `Editor` (files in a dict, terminals that follow a script) and an event log."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from acp_agent.messages import TurnEvent
from acp_agent.tools import SessionToolState, ToolContext, ToolFailed
from acp_agent.tools.base import TerminalExit, TerminalOutput


@dataclass
class ScriptedTerminal:
    """How the next terminal behaves: its output, its exit and how long it runs."""

    output: str = ""
    exit_code: int | None = 0
    signal: str | None = None
    runs_for: float = 0.0
    """Seconds from the first wait until it exits on its own; `math.inf`: until killed."""
    truncated: bool = False
    wait_error: str | None = None
    """`wait_for_terminal_exit` fails with this message instead of waiting."""


@dataclass
class _Terminal:
    script: ScriptedTerminal
    command: str
    args: list[str]
    cwd: str
    env: dict[str, str]
    output_byte_limit: int
    killed: anyio.Event = field(default_factory=anyio.Event)
    finished: bool = False
    released: bool = False

    def exit(self) -> TerminalExit:
        if self.killed.is_set():
            return TerminalExit(None, "SIGKILL")
        return TerminalExit(self.script.exit_code, self.script.signal)


class FakeEditor:
    """The client's side of files and terminals, with every call recorded in `calls`."""

    def __init__(
        self,
        files: Mapping[str, str] | None = None,
        *,
        can_read_files: bool = True,
        can_write_files: bool = True,
        can_run_terminals: bool = True,
        terminals: Sequence[ScriptedTerminal] = (),
        read_errors: Mapping[str, str] | None = None,
        missing_reads_empty: bool = False,
    ) -> None:
        self.files = dict(files or {})
        self.can_read_files = can_read_files
        self.can_write_files = can_write_files
        self.can_run_terminals = can_run_terminals
        self.scripts = list(terminals)
        self.read_errors = dict(read_errors or {})
        self.missing_reads_empty = missing_reads_empty
        """Answer a read of a file it does not have with empty content (Toad, CodeCompanion)."""
        self.terminals: dict[str, _Terminal] = {}
        self.calls: list[tuple[Any, ...]] = []
        self._ids = itertools.count(1)

    # --- files ---------------------------------------------------------------------------

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        self.calls.append(("read", path, line, limit))
        assert self.can_read_files, "read without the capability"
        if path in self.read_errors:
            raise ToolFailed(f"the editor could not read {path}: {self.read_errors[path]}")
        if path not in self.files:
            if self.missing_reads_empty:
                return ""
            raise ToolFailed(f"the editor could not read {path}: Internal error")
        lines = self.files[path].splitlines(keepends=True)
        first = (line or 1) - 1
        last = None if limit is None else first + limit
        return "".join(lines[first:last])

    async def write_text_file(self, path: str, content: str) -> None:
        self.calls.append(("write", path, content))
        assert self.can_write_files, "write without the capability"
        self.files[path] = content

    @property
    def writes(self) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[0] == "write"]

    # --- terminals -----------------------------------------------------------------------

    async def create_terminal(
        self,
        command: str,
        args: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        output_byte_limit: int,
    ) -> str:
        assert self.can_run_terminals, "terminal without the capability"
        terminal_id = f"term-{next(self._ids)}"
        self.calls.append(("create", terminal_id, command, list(args), cwd))
        script = self.scripts.pop(0) if self.scripts else ScriptedTerminal()
        self.terminals[terminal_id] = _Terminal(
            script, command, list(args), cwd, dict(env), output_byte_limit
        )
        return terminal_id

    async def terminal_output(self, terminal_id: str) -> TerminalOutput:
        terminal = self._live(terminal_id, "output")
        done = terminal.finished or terminal.killed.is_set()
        return TerminalOutput(
            terminal.script.output, terminal.script.truncated, terminal.exit() if done else None
        )

    async def wait_for_terminal_exit(self, terminal_id: str) -> TerminalExit:
        terminal = self._live(terminal_id, "wait")
        if terminal.script.wait_error:
            raise ToolFailed(terminal.script.wait_error)
        runs_for = terminal.script.runs_for
        with anyio.move_on_after(None if math.isinf(runs_for) else runs_for):
            await terminal.killed.wait()
        terminal.finished = True
        return terminal.exit()

    async def kill_terminal(self, terminal_id: str) -> None:
        self._live(terminal_id, "kill").killed.set()

    async def release_terminal(self, terminal_id: str) -> None:
        terminal = self._live(terminal_id, "release")
        terminal.released = True
        terminal.killed.set()  # ACP: releasing kills a command that still runs

    def _live(self, terminal_id: str, method: str) -> _Terminal:
        self.calls.append((method, terminal_id))
        terminal = self.terminals[terminal_id]
        assert not terminal.released, f"{method} after release"
        return terminal

    def terminal_calls(self) -> list[str]:
        terminal_methods = {"create", "output", "wait", "kill", "release"}
        return [call[0] for call in self.calls if call[0] in terminal_methods]


class Events:
    """Collects what a tool emits through `ToolContext.emit`."""

    def __init__(self) -> None:
        self.items: list[TurnEvent] = []

    async def __call__(self, event: TurnEvent) -> None:
        self.items.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [event for event in self.items if isinstance(event, kind)]


def make_context(
    root: Path,
    editor: Any,
    *,
    extra_roots: Sequence[Path] = (),
    events: Events | None = None,
    state: SessionToolState | None = None,
    shell_timeout: float = 30.0,
    client_shows_terminal_stream: bool = False,
) -> ToolContext:
    return ToolContext(
        session_id="sess-test",
        cwd=root,
        roots=(root, *extra_roots),
        editor=editor,
        state=state or SessionToolState(),
        tool_call_id="call-1",
        emit=events or Events(),
        shell_timeout=shell_timeout,
        client_shows_terminal_stream=client_shows_terminal_stream,
    )
