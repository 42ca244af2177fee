"""The client's own files and terminals, as `fs/*` and `terminal/*` expect them.

Params arrive as the agent sent them (plain JSON); a bad one becomes -32602 naming the
field. Commands run in their own process group, never on our stdout, and the whole group
is ended on kill, release and exit, so nothing the agent started outlives the run. Their
environment is ours as `child_environment` cleans it (no API keys), plus what the agent
asks for.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import Process, TaskGroup

from ..child_env import child_environment
from ..rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError

# After the command exits, how long its output may still trail in through the pipe (a
# background child can hold the pipe open forever; we do not wait for that).
OUTPUT_GRACE_SECONDS = 1.0
# Between SIGTERM and SIGKILL when a terminal is killed.
KILL_GRACE_SECONDS = 2.0


# --- files ---------------------------------------------------------------------------------


def select_lines(text: str, line: int | None, limit: int | None) -> str:
    """`limit` lines from 1-based `line` on, line endings kept (0 or None mean line 1)."""
    lines = text.splitlines(keepends=True)
    start = max(line or 1, 1) - 1
    end = None if limit is None else start + max(limit, 0)
    return "".join(lines[start:end])


async def read_text_file(params: Any) -> dict[str, Any]:
    path = _absolute_path(params)
    line = _optional_int(params, "line")
    limit = _optional_int(params, "limit")
    try:
        data = await anyio.Path(path).read_bytes()
    except FileNotFoundError:
        raise RpcError(RESOURCE_NOT_FOUND, f"{path}: no such file") from None
    except IsADirectoryError:
        raise RpcError(INVALID_PARAMS, f"{path} is a directory, not a file") from None
    except OSError as exc:
        raise RpcError(INTERNAL_ERROR, f"cannot read {path}: {exc.strerror or exc}") from None
    # Decoding bytes ourselves keeps "\r\n" as the file has it.
    text = data.decode("utf-8", errors="replace")
    return {"content": select_lines(text, line, limit)}


async def write_text_file(params: Any) -> dict[str, Any]:
    path = _absolute_path(params)
    content = _required_str(params, "content")
    try:
        await anyio.Path(path).parent.mkdir(parents=True, exist_ok=True)
        await anyio.Path(path).write_bytes(content.encode("utf-8"))
    except OSError as exc:
        raise RpcError(INTERNAL_ERROR, f"cannot write {path}: {exc.strerror or exc}") from None
    return {}


# --- terminals -----------------------------------------------------------------------------


def keep_tail(data: bytes, limit: int) -> bytes:
    """The last `limit` bytes of `data` or fewer: the cut never splits a UTF-8 character."""
    if len(data) <= limit:
        return data
    start = len(data) - limit
    while start < len(data) and data[start] & 0xC0 == 0x80:  # a continuation byte
        start += 1
    return data[start:]


@dataclass
class _Terminal:
    process: Process
    byte_limit: int | None
    output: bytes = b""
    truncated: bool = False
    exit_status: dict[str, Any] | None = None
    output_done: anyio.Event = field(default_factory=anyio.Event)
    exited: anyio.Event = field(default_factory=anyio.Event)

    def append(self, chunk: bytes) -> None:
        self.output += chunk
        if self.byte_limit is not None and len(self.output) > self.byte_limit:
            self.output = keep_tail(self.output, self.byte_limit)
            self.truncated = True


class Terminals:
    """Every terminal the agent created; pumps run in the connection's task group."""

    def __init__(
        self, task_group: TaskGroup, default_cwd: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self._task_group = task_group
        self._default_cwd = default_cwd
        # What commands start from, before the agent's additions: `child_environment` of
        # ours under the run's config, so the model's commands never see our keys.
        self._env = child_environment(os.environ) if env is None else env
        self._terminals: dict[str, _Terminal] = {}
        self._ids = itertools.count(1)

    async def create(self, params: Any) -> dict[str, Any]:
        command = _command_line(params)
        cwd = _optional_str(params, "cwd") or str(self._default_cwd)
        limit = _optional_int(params, "outputByteLimit")
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            # Shielded: once forked, the process must reach us, or a cancel landing before
            # its pipes are connected would orphan its children (see tools/local.py).
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    command,
                    cwd=cwd,
                    env={**self._env, **_env(params)},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group, killed as one
                )
        except OSError as exc:
            raise RpcError(
                INTERNAL_ERROR, f"cannot start {command[0]}: {exc.strerror or exc}"
            ) from None
        terminal = _Terminal(process, limit)
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            await _end_group(terminal)  # the agent stopped waiting: nobody would end it
            raise
        terminal_id = f"term-{next(self._ids)}"
        self._terminals[terminal_id] = terminal
        self._task_group.start_soon(_collect_output, terminal)
        self._task_group.start_soon(_await_exit, terminal)
        return {"terminalId": terminal_id}

    def output(self, params: Any) -> dict[str, Any]:
        terminal = self._terminal(params)
        result: dict[str, Any] = {
            "output": terminal.output.decode("utf-8", errors="replace"),
            "truncated": terminal.truncated,
        }
        if terminal.exit_status is not None:
            result["exitStatus"] = terminal.exit_status
        return result

    async def wait_for_exit(self, params: Any) -> dict[str, Any]:
        terminal = self._terminal(params)
        await terminal.exited.wait()
        assert terminal.exit_status is not None
        return terminal.exit_status

    async def kill(self, params: Any) -> dict[str, Any]:
        await _end_group(self._terminal(params))
        return {}

    async def release(self, params: Any) -> dict[str, Any]:
        terminal = self._terminal(params)
        del self._terminals[_required_str(params, "terminalId")]
        await _end_group(terminal)
        return {}

    async def close(self) -> None:
        """Ends every terminal still held; the run is over."""
        terminals, self._terminals = list(self._terminals.values()), {}
        for terminal in terminals:
            await _end_group(terminal)

    def _terminal(self, params: Any) -> _Terminal:
        terminal_id = _required_str(params, "terminalId")
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown terminal {terminal_id!r}")
        return terminal


def _command_line(params: Any) -> list[str]:
    command = _required_str(params, "command")
    args = params.get("args") or []
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise RpcError(INVALID_PARAMS, "args must be a list of strings")
    if not args:
        # Agents often send a whole command line ("ls -la | head") with no args; a shell
        # runs both that and a bare program name.
        return ["/bin/sh", "-c", command]
    return [command, *args]


def _env(params: Any) -> dict[str, str]:
    entries = params.get("env") or []
    if not isinstance(entries, list):
        raise RpcError(INVALID_PARAMS, "env must be a list of {name, value}")
    env: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise RpcError(INVALID_PARAMS, "env must be a list of {name, value}")
        env[_required_str(entry, "name")] = _required_str(entry, "value")
    return env


async def _collect_output(terminal: _Terminal) -> None:
    assert terminal.process.stdout is not None
    try:
        async for chunk in terminal.process.stdout:
            terminal.append(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        terminal.output_done.set()


async def _await_exit(terminal: _Terminal) -> None:
    code = await terminal.process.wait()
    with anyio.move_on_after(OUTPUT_GRACE_SECONDS):
        await terminal.output_done.wait()
    terminal.exit_status = exit_status(code)
    terminal.exited.set()


def exit_status(returncode: int) -> dict[str, Any]:
    """ACP's exit status; both keys always present, as agents test them against null."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return {"exitCode": None, "signal": name}
    return {"exitCode": returncode, "signal": None}


async def _end_group(terminal: _Terminal) -> None:
    """SIGTERM the command's group, SIGKILL it after a grace period; stragglers too."""
    with anyio.CancelScope(shield=True):
        pid = terminal.process.pid
        if terminal.process.returncode is None:
            _signal_group(pid, signal.SIGTERM)
            with anyio.move_on_after(KILL_GRACE_SECONDS):
                await terminal.process.wait()
        # Background children of the command share its group and may outlive it.
        _signal_group(pid, signal.SIGKILL)
        await terminal.process.wait()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(pgid, signum)


# --- params --------------------------------------------------------------------------------


def _absolute_path(params: Any) -> Path:
    path = Path(_required_str(params, "path"))
    if not path.is_absolute():
        raise RpcError(INVALID_PARAMS, f"path must be absolute, got {str(path)!r}")
    return path


def _required_str(params: Any, key: str) -> str:
    value = params.get(key) if isinstance(params, dict) else None
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f"{key} must be a string")
    return value


def _optional_str(params: Any, key: str) -> str | None:
    value = params.get(key) if isinstance(params, dict) else None
    return value if isinstance(value, str) else None


def _optional_int(params: Any, key: str) -> int | None:
    value = params.get(key) if isinstance(params, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RpcError(INVALID_PARAMS, f"{key} must be an integer")
    return value
