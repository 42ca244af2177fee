"""A session's choices as ACP config options (and the legacy `models` state)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import AgentConfig, ModelConfig, ThoughtLevel
from ..sessions import Session
from ..tools.permissions import ModeInfo
from . import schema as s

MODEL = "model"
THOUGHT_LEVEL = "thought_level"
MODE = "mode"

THOUGHT_LEVELS: tuple[tuple[ThoughtLevel, str], ...] = (
    ("off", "Off"),
    ("low", "Low"),
    ("medium", "Medium"),
    ("high", "High"),
)


def current_model(config: AgentConfig, session: Session) -> ModelConfig:
    return config.find_model(session.model_choice)[2]


def thought_level(config: AgentConfig, session: Session) -> ThoughtLevel | None:
    """The effort to ask for, or None when the session's model does not reason."""
    model = current_model(config, session)
    if not model.reasoning:
        return None
    return session.thought_level or model.thought_level


def config_options(config: AgentConfig, session: Session, modes: Sequence[ModeInfo]) -> list[Any]:
    options: list[Any] = [_model_option(config, session)]
    level = thought_level(config, session)
    if level is not None:
        options.append(
            s.SessionConfigOptionSelect(
                type="select",
                id=THOUGHT_LEVEL,
                name="Thinking",
                description="How much the model reasons before answering.",
                category="thought_level",
                current_value=level,
                options=[
                    s.SessionConfigSelectOption(value=value, name=name)
                    for value, name in THOUGHT_LEVELS
                ],
            )
        )
    if modes:
        options.append(
            s.SessionConfigOptionSelect(
                type="select",
                id=MODE,
                name="Mode",
                description="What the agent may do without asking.",
                category="mode",
                current_value=session.mode,
                options=[
                    s.SessionConfigSelectOption(value=m.id, name=m.name, description=m.description)
                    for m in modes
                ],
            )
        )
    return options


def _model_option(config: AgentConfig, session: Session) -> Any:
    groups = [
        s.SessionConfigSelectGroup(
            group=provider,
            name=provider,
            options=[
                s.SessionConfigSelectOption(
                    value=f"{provider}/{model.id}",
                    name=model.name or model.id,
                    description=f"{model.context_window:,} token context",
                )
                for model in provider_config.models
            ],
        )
        for provider, provider_config in config.providers.items()
    ]
    return s.SessionConfigOptionSelect(
        type="select",
        id=MODEL,
        name="Model",
        description="The model that answers the next prompt.",
        category="model",
        current_value=session.model_choice,
        options=groups,
    )


def legacy_models_state(config: AgentConfig, session: Session) -> dict[str, Any]:
    """The older `models` field of session responses (read by clients without config options)."""
    return {
        "currentModelId": session.model_choice,
        "availableModels": [
            {"modelId": choice, "name": model.name or choice}
            for choice, _, model in config.model_choices()
        ],
    }


def mode_state(session: Session, modes: Sequence[ModeInfo]) -> s.SessionModeState:
    return s.SessionModeState(
        current_mode_id=session.mode,
        available_modes=[
            s.SessionMode(id=m.id, name=m.name, description=m.description) for m in modes
        ],
    )
