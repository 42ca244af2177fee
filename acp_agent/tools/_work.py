"""The pieces of a session's work the user may stop one at a time, without ending the turn:
a running tool call, or a command's display terminal (a foreground command of `shell`, or
a background job's).

The engine registers each running call's cancel scope; `shell` and `jobs.py` register each
terminal with how to stop its command. A stop only ends that piece: the call's result tells
the model the user cancelled it, a stopped command ends by its signal, and the turn goes
on. The registry is per session, so an id of another session's work is unknown here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import anyio

StopCommand = Callable[[], Awaitable[None]]


class SessionWork:
    def __init__(self) -> None:
        self._calls: dict[str, anyio.CancelScope] = {}
        self._terminals: dict[str, StopCommand] = {}
        self._stopped: set[str] = set()
        """Terminals stopped by the user (their command reports it)."""

    @contextmanager
    def tool_call(self, call_id: str) -> Iterator[anyio.CancelScope]:
        """The call's run, cancellable by `cancel_tool_call` while it lasts: the scope
        catches that cancel (`cancelled_caught`), never the turn's."""
        with anyio.CancelScope() as scope:
            self._calls[call_id] = scope
            try:
                yield scope
            finally:
                self._calls.pop(call_id, None)

    def cancel_tool_call(self, call_id: str) -> bool:
        """Cancel the running call `call_id`; False when no such call runs (unknown, or
        already ended)."""
        scope = self._calls.get(call_id)
        if scope is None:
            return False
        scope.cancel()
        return True

    @contextmanager
    def terminal(self, terminal_id: str, stop: StopCommand) -> Iterator[None]:
        """A command running behind display terminal `terminal_id`, stoppable while it
        lasts."""
        self._terminals[terminal_id] = stop
        try:
            yield
        finally:
            self.forget_terminal(terminal_id)

    def add_terminal(self, terminal_id: str, stop: StopCommand) -> None:
        """As `terminal`, for a command that outlives the caller (a background job)."""
        self._terminals[terminal_id] = stop

    def forget_terminal(self, terminal_id: str) -> None:
        self._terminals.pop(terminal_id, None)
        self._stopped.discard(terminal_id)

    async def stop_terminal(self, terminal_id: str) -> bool:
        """Stop the command of `terminal_id`; False when none runs there (unknown, or it
        has exited)."""
        stop = self._terminals.get(terminal_id)
        if stop is None:
            return False
        self._stopped.add(terminal_id)
        await stop()
        return True

    def stopped_by_user(self, terminal_id: str) -> bool:
        return terminal_id in self._stopped


__all__ = ["SessionWork", "StopCommand"]
