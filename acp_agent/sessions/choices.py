"""A session's choices: its model, permission mode and thought level (ACP config options,
`session/set_mode`, the legacy `session/set_model`, `/model` and `/mode`).

A choice applies from the next model request (model, thought level) or tool call (mode),
also in a running turn, and is stored before it applies. A stored session gets its
choices back only where the configuration still offers them.
"""

from __future__ import annotations

import logging

from ..config import AgentConfig, ThoughtLevel
from ..tools.permissions import MODES, is_mode
from .errors import ChoiceError
from .live import Live
from .records import ChoiceRecord
from .restore import StoredSession
from .session import Session
from .turns import TurnRunner

log = logging.getLogger(__name__)

MODEL = "model"
THOUGHT_LEVEL = "thought_level"
MODE = "mode"
THOUGHT_LEVELS: tuple[ThoughtLevel, ...] = ("off", "low", "medium", "high")


class Choices:
    def __init__(self, config: AgentConfig, runner: TurnRunner) -> None:
        self._config = config
        self._runner = runner

    def thought_level(self, session: Session) -> ThoughtLevel | None:
        """The effort to ask for, or None when the session's model does not reason."""
        return self._runner.thought_level(session)

    def choose(self, entry: Live, option: str, value: str) -> None:
        """Set one of the session's choices, or `ChoiceError`."""
        session = entry.session
        if option == MODEL:
            try:
                self._config.find_model(value)
            except ValueError as exc:
                raise ChoiceError(str(exc)) from None
            session.model_choice = value
            entry.writer.append(ChoiceRecord(model=value))
        elif option == THOUGHT_LEVEL:
            if self.thought_level(session) is None:
                raise ChoiceError(f"{session.model_choice} has no thinking levels")
            if value not in THOUGHT_LEVELS:
                raise ChoiceError(f"thought_level must be one of {', '.join(THOUGHT_LEVELS)}")
            session.thought_level = value
            entry.writer.append(ChoiceRecord(thought_level=value))
        elif option == MODE:
            if not is_mode(value):
                known = ", ".join(mode.id for mode in MODES)
                raise ChoiceError(f"unknown mode {value!r}; modes: {known}")
            session.mode = value
            entry.writer.append(ChoiceRecord(mode=value))
        else:
            raise ChoiceError(f"unknown config option {option!r}")
        log.info("session %s: %s = %s", session.id, option, value)

    def restore(self, session: Session, stored: StoredSession) -> None:
        """The stored choices the configuration still offers (else the defaults stay)."""
        if stored.model is not None:
            try:
                self._config.find_model(stored.model)
                session.model_choice = stored.model
            except ValueError:
                log.warning(
                    "session %s used %s, which the configuration no longer has; using %s",
                    session.id,
                    stored.model,
                    session.model_choice,
                )
        if stored.mode is not None and is_mode(stored.mode):
            session.mode = stored.mode
        if stored.thought_level in THOUGHT_LEVELS:
            session.thought_level = stored.thought_level
