"""The client side of the connection: what the agent may ask of us, and our answers.

Requests from the agent (`fs/*`, `terminal/*`, `session/request_permission`) and its
`session/update` notifications arrive here through `rpc.Endpoint.serve`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import anyio

from ..rpc.endpoint import Work
from ..rpc.errors import INVALID_PARAMS, METHOD_NOT_FOUND, RpcError
from . import _local
from ._console import Console

PermissionMode = Literal["approve", "ask", "reject"]
CANCELLED_OUTCOME = {"outcome": {"outcome": "cancelled"}}


class LocalClient:
    """Implements `rpc.endpoint.Handler` for the runner."""

    def __init__(
        self,
        console: Console,
        terminals: _local.Terminals,
        permissions: Permissions,
        observe: Callable[[Any], None] | None = None,
        stdout_closed: Callable[[], None] | None = None,
    ) -> None:
        self._console = console
        self._terminals = terminals
        self.permissions = permissions
        self._observe = observe
        """Also sees every `session/update` payload (the transcript for --output json)."""
        self._stdout_closed = stdout_closed
        """Called when printing an update found stdout's reader gone (`| head`)."""

    def receive_request(self, method: str, params: Any) -> Work:
        return partial(self._answer, method, params)

    async def _answer(self, method: str, params: Any) -> Any:
        match method:
            case "fs/read_text_file":
                return await _local.read_text_file(params)
            case "fs/write_text_file":
                return await _local.write_text_file(params)
            case "terminal/create":
                return await self._terminals.create(params)
            case "terminal/output":
                return self._terminals.output(params)
            case "terminal/wait_for_exit":
                return await self._terminals.wait_for_exit(params)
            case "terminal/kill":
                return await self._terminals.kill(params)
            case "terminal/release":
                return await self._terminals.release(params)
            case "session/request_permission":
                return await self.permissions.answer(params)
            case _:
                raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")

    async def handle_notification(self, method: str, params: Any) -> None:
        if method != "session/update" or not isinstance(params, dict):
            return
        try:
            self._console.show_update(params.get("update"))
            if self._observe is not None:
                self._observe(params.get("update"))
        except BrokenPipeError:
            if self._stdout_closed is None:
                raise
            self._stdout_closed()


class Permissions:
    """Answers permission requests: approve all (`--yes`), ask on the TTY, or reject."""

    def __init__(self, console: Console, mode: PermissionMode) -> None:
        self._console = console
        self._mode = mode
        self._asking: set[anyio.CancelScope] = set()
        self._cancelled = False

    def cancel_all(self) -> None:
        """The user cancelled the turn: pending and later requests answer `cancelled`."""
        self._cancelled = True
        for scope in self._asking:
            scope.cancel()

    async def answer(self, params: Any) -> dict[str, Any]:
        if not isinstance(params, dict) or not isinstance(params.get("options"), list):
            raise RpcError(INVALID_PARAMS, "session/request_permission needs options")
        options = [o for o in params["options"] if isinstance(o, dict)]
        tool_call = params.get("toolCall")
        if not isinstance(tool_call, dict):
            tool_call = {}
        given_title = tool_call.get("title")
        if not isinstance(given_title, str):
            given_title = None
        title = given_title or "a tool call"
        self._console.announce_tool_call(str(tool_call.get("toolCallId")), given_title)
        if self._cancelled:
            return CANCELLED_OUTCOME
        match self._mode:
            case "approve":
                return self._choose(options, ("allow_once", "allow_always"), title, "--yes")
            case "reject":
                reason = "no TTY; pass --yes to approve"
                return self._choose(options, ("reject_once", "reject_always"), title, reason)
            case "ask":
                return await self._ask_cancellably(title, options)

    def _choose(
        self, options: list[dict[str, Any]], kinds: tuple[str, ...], title: str, why: str
    ) -> dict[str, Any]:
        """The first option of the first kind offered; `cancelled` when none fits."""
        for kind in kinds:
            for option in options:
                if option.get("kind") == kind:
                    verb = "approved" if kind.startswith("allow") else "rejected"
                    self._console.notice(f"  permission {verb}: {title} ({why})")
                    return _selected(option)
        self._console.notice(f"  permission not given: {title} (no {kinds[0]} option offered)")
        return CANCELLED_OUTCOME

    async def _ask_cancellably(self, title: str, options: list[dict[str, Any]]) -> dict[str, Any]:
        with anyio.CancelScope() as scope:
            self._asking.add(scope)
            try:
                return await self._ask(title, options)
            finally:
                self._asking.discard(scope)
        return CANCELLED_OUTCOME

    async def _ask(self, title: str, options: list[dict[str, Any]]) -> dict[str, Any]:
        if not options:
            return CANCELLED_OUTCOME
        self._console.notice(f"? Allow {title}?")
        for number, option in enumerate(options, start=1):
            self._console.notice(f"  {number}) {option.get('name') or option.get('kind')}")
        while True:
            self._console.prompt(f"choose 1-{len(options)}: ")
            try:
                line = await _read_tty_line()
            finally:
                self._console.answered()
            if line is None:  # end of input: no consent
                return self._choose(options, ("reject_once", "reject_always"), title, "no answer")
            chosen = _pick(options, line)
            if chosen is not None:
                return _selected(chosen)


def _pick(options: list[dict[str, Any]], answer: str) -> dict[str, Any] | None:
    """The option named by its number, optionId or kind."""
    answer = answer.strip()
    if answer.isdigit() and 1 <= int(answer) <= len(options):
        return options[int(answer) - 1]
    for option in options:
        if answer and answer in (option.get("optionId"), option.get("kind")):
            return option
    return None


def _selected(option: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option.get("optionId")}}


async def _read_tty_line() -> str | None:
    """One line typed on stdin (a TTY), or None at end of input.

    It waits for readability on the event loop rather than in a worker thread: a thread
    blocked in `readline` could not be cancelled and would hold the process open at exit.
    """
    fd = sys.stdin.fileno()
    await anyio.wait_readable(fd)
    data = os.read(fd, 4096)
    return data.decode(errors="replace") if data else None
