"""A session's choices: its model, permission mode and thought level (ACP config options,
`session/set_mode`, the legacy `session/set_model`, `/model` and `/mode`).

A choice applies from the next model request (model, thought level) or tool call (mode),
also in a running turn, and is stored before it applies. A stored session gets its
choices back only where the configuration still offers them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..config import AgentConfig, Speed, ThoughtLevel
from ..messages import Notice
from ..tools.permissions import MODES, is_mode
from .errors import ChoiceError
from .live import Live
from .records import ChoiceRecord
from .restore import StoredSession
from .session import Session

if TYPE_CHECKING:
    from ..providers.pool import ProviderPool

log = logging.getLogger(__name__)

MODEL = "model"
THOUGHT_LEVEL = "thought_level"
MODE = "mode"
SPEED = "speed"
THOUGHT_LEVELS: tuple[ThoughtLevel, ...] = ("off", "low", "medium", "high")
SPEEDS: tuple[Speed, ...] = ("standard", "fast")


def thought_level(config: AgentConfig, session: Session) -> ThoughtLevel | None:
    """The effort to ask for, or None when the session's model does not reason."""
    model = config.find_model(session.model_choice)[2]
    if not model.reasoning:
        return None
    return session.thought_level or model.thought_level


def speed(config: AgentConfig, session: Session) -> Speed | None:
    """The serving speed to ask for, or None when the session's model has one only."""
    model = config.find_model(session.model_choice)[2]
    if not model.fast:
        return None
    return session.speed or "standard"


class Choices:
    def __init__(self, config: AgentConfig, providers: ProviderPool) -> None:
        self._config = config
        self._providers = providers

    def thought_level(self, session: Session) -> ThoughtLevel | None:
        return thought_level(self._config, session)

    def speed(self, session: Session) -> Speed | None:
        return speed(self._config, session)

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
        elif option == SPEED:
            if self.speed(session) is None:
                raise ChoiceError(f"{session.model_choice} has one speed only")
            speed = next((speed for speed in SPEEDS if speed == value), None)
            if speed is None:
                raise ChoiceError(f"speed must be one of {', '.join(SPEEDS)}")
            session.speed = speed
            entry.writer.append(ChoiceRecord(speed=speed))
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
            self._restore_model(session, stored.model)
        if stored.mode is not None and is_mode(stored.mode):
            session.mode = stored.mode
        if stored.thought_level in THOUGHT_LEVELS:
            session.thought_level = stored.thought_level
        session.speed = next((speed for speed in SPEEDS if speed == stored.speed), None)

    def _restore_model(self, session: Session, model: str) -> None:
        """The stored model where it is still offered, else the default stays (the stored
        choice too: the editor's disable lasts this process only)."""
        try:
            self._config.find_model(model)
        except ValueError:
            log.warning(
                "session %s used %s, which the configuration no longer has; using %s",
                session.id,
                model,
                session.model_choice,
            )
            return
        provider = model.split("/", 1)[0]
        if self._providers.enabled(provider):
            session.model_choice = model
            return
        why = f"the editor disabled provider {provider}"
        log.info(
            "session %s used %s, but %s; using %s", session.id, model, why, session.model_choice
        )
        session.pending_notices.append(moved_model_notice(model, session.model_choice, why))


def moved_model_notice(moved_from: str, now: str, why: str) -> Notice:
    """A session's model is no longer offered, so it uses `now`: told apart from the
    conversation (a notice, or one bracketed line for clients without notices)."""
    return Notice(
        f"{moved_from} is no longer offered",
        f"{why}; this session now uses {now}",
        severity="warning",
    )
