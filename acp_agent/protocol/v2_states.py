"""Each session's v2 `state_update`s on one connection: its foreground state and its
background work, together.

The schema: "an Agent that reports background work MUST include it on every state update
for the session". So every `state_update` is built here, from the session's last
foreground state and the last complete list of its background work (`BackgroundChanged`);
a change of either sends both. A change of the background list alone repeats the
foreground state without a stop reason (it ends no foreground work).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..messages import BackgroundChanged
from ..rpc.errors import RpcError
from .v2_updates import (
    BackgroundTerminal,
    BackgroundWork,
    JsonObject,
    SessionState,
    StopReason,
    state_update,
)


@dataclass(slots=True)
class _Session:
    state: SessionState | None = None
    """None: never reported on this connection (a subagent's session)."""
    background: tuple[BackgroundWork, ...] = ()
    questions: int = 0
    """Questions to the user waiting now (permissions, elicitations)."""


class SessionStates:
    """The state of every session of one v2 connection, as last reported."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}

    def foreground(
        self,
        session_id: str,
        state: SessionState,
        stop_reason: StopReason | None = None,
        error: RpcError | None = None,
    ) -> JsonObject:
        """The `state_update` for a change of the foreground state."""
        session = self._sessions.setdefault(session_id, _Session())
        session.state = state
        return state_update(state, stop_reason, error, session.background)

    def background(self, session_id: str, changed: BackgroundChanged) -> JsonObject | None:
        """The `state_update` for a change of the session's background work; None for a
        session whose state is not reported here."""
        session = self._sessions.setdefault(session_id, _Session())
        session.background = tuple(BackgroundTerminal(t) for t in changed.terminals)
        if session.state is None:
            return None
        return state_update(session.state, background=session.background)

    def asking(self, session_id: str) -> JsonObject | None:
        """A question to the user starts waiting: the first one of running work makes it
        `requires_action` (a question while the session is idle blocks no turn)."""
        session = self._sessions.setdefault(session_id, _Session())
        session.questions += 1
        if session.questions > 1 or session.state == "idle":
            return None
        return self.foreground(session_id, "requires_action")

    def answered(self, session_id: str) -> JsonObject | None:
        """A question was answered (or withdrawn): the last one lets the work run on."""
        session = self._sessions.setdefault(session_id, _Session())
        session.questions = max(0, session.questions - 1)
        if session.questions or session.state != "requires_action":
            return None
        return self.foreground(session_id, "running")

    def status(self, session_id: str, answer: JsonObject) -> JsonObject:
        """`session/status`'s `answer` with the session's state as last reported here
        (`requires_action`, background work): a snapshot, not a transition, so without a
        stop reason. Unchanged for a session not reported on this connection."""
        session = self._sessions.get(session_id)
        if answer.get("status") != "open" or session is None or session.state is None:
            return answer
        snapshot = state_update(session.state, background=session.background)
        del snapshot["sessionUpdate"]  # the `StateUpdate` itself, not its notification
        return {**answer, "state": snapshot}


__all__ = ["SessionStates"]
