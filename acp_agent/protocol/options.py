"""A session's choices as ACP config options (and the legacy `models` state)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import AgentConfig, ThoughtLevel
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


@dataclass(frozen=True, slots=True)
class Choices:
    """What a session has chosen, as the editor shows it."""

    model: str
    """'provider/model'."""
    mode: str
    thought_level: ThoughtLevel | None
    """The effective level; None when the model does not reason."""


def config_options(config: AgentConfig, choices: Choices, modes: Sequence[ModeInfo]) -> list[Any]:
    options: list[Any] = [_model_option(config, choices)]
    level = choices.thought_level
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
                current_value=choices.mode,
                options=[
                    s.SessionConfigSelectOption(value=m.id, name=m.name, description=m.description)
                    for m in modes
                ],
            )
        )
    return options


def _model_option(config: AgentConfig, choices: Choices) -> Any:
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
        current_value=choices.model,
        options=groups,
    )


def legacy_models_state(config: AgentConfig, choices: Choices) -> dict[str, Any]:
    """The older `models` field of session responses (read by clients without config options)."""
    return {
        "currentModelId": choices.model,
        "availableModels": [
            {"modelId": choice, "name": model.name or choice}
            for choice, _, model in config.model_choices()
        ],
    }


def mode_state(choices: Choices, modes: Sequence[ModeInfo]) -> s.SessionModeState:
    return s.SessionModeState(
        current_mode_id=choices.mode,
        available_modes=[
            s.SessionMode(id=m.id, name=m.name, description=m.description) for m in modes
        ],
    )
