"""A session's choices as ACP config options (and the legacy `models` state), as plain JSON
(see `updates`: every session answer carries them)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import AgentConfig, Speed, ThoughtLevel
from ..tools.permissions import ModeInfo

MODEL = "model"
THOUGHT_LEVEL = "thought_level"
MODE = "mode"
SPEED = "speed"
SPEED_CATEGORY = "model_config"
"""The schema has no speed category; `model_config` is its "model-related configuration
parameter" (custom ones must start with `_`, other names are reserved for ACP)."""
SPEEDS: tuple[tuple[Speed, str, str], ...] = (
    ("standard", "Standard", "The usual serving."),
    ("fast", "Fast", "Faster answers at a higher price (the vendor's priority serving)."),
)

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
    speed: Speed | None = None
    """The effective speed; None when the model has one only."""


def config_options(
    config: AgentConfig,
    choices: Choices,
    modes: Sequence[ModeInfo],
    routed: Collection[str] = (),
) -> list[dict[str, Any]]:
    """`routed`: the providers the editor routes (`providers/set`), said so in each model's
    description."""
    options = [_model_option(config, choices, routed)]
    level = choices.thought_level
    if level is not None:
        options.append(
            _select(
                THOUGHT_LEVEL,
                "Thinking",
                "How much the model reasons before answering.",
                current=level,
                options=[{"value": value, "name": name} for value, name in THOUGHT_LEVELS],
            )
        )
    if choices.speed is not None:
        options.append(
            _select(
                SPEED,
                "Speed",
                "How fast the model is served, and at what price.",
                current=choices.speed,
                options=[
                    {"value": value, "name": name, "description": description}
                    for value, name, description in SPEEDS
                ],
                category=SPEED_CATEGORY,
            )
        )
    if modes:
        options.append(
            _select(
                MODE,
                "Mode",
                "What the agent may do without asking.",
                current=choices.mode,
                options=[
                    {"value": m.id, "name": m.name, "description": m.description} for m in modes
                ],
            )
        )
    return options


def _model_option(config: AgentConfig, choices: Choices, routed: Collection[str]) -> dict[str, Any]:
    groups = [
        {
            "group": provider,
            "name": provider,
            "options": [
                {
                    "value": f"{provider}/{model.id}",
                    "name": model.name or model.id,
                    "description": f"{model.context_window:,} token context"
                    + (", routed by the editor" if provider in routed else ""),
                }
                for model in provider_config.models
            ],
        }
        for provider, provider_config in config.providers.items()
    ]
    return _select(
        MODEL,
        "Model",
        "The model that answers the next prompt.",
        current=choices.model,
        options=groups,
    )


def _select(
    option_id: str,
    name: str,
    description: str,
    *,
    current: str,
    options: list[dict[str, Any]],
    category: str | None = None,
) -> dict[str, Any]:
    """A `select` config option; its category is its id unless given (model,
    thought_level, mode are the schema's)."""
    return {
        "type": "select",
        "id": option_id,
        "name": name,
        "description": description,
        "category": category or option_id,
        "currentValue": current,
        "options": options,
    }


def legacy_models_state(config: AgentConfig, choices: Choices) -> dict[str, Any]:
    """The older `models` field of session responses (read by clients without config options)."""
    return {
        "currentModelId": choices.model,
        "availableModels": [
            {"modelId": choice, "name": model.name or choice}
            for choice, _, model in config.model_choices()
        ],
    }


def mode_state(choices: Choices, modes: Sequence[ModeInfo]) -> dict[str, Any]:
    return {
        "currentModeId": choices.mode,
        "availableModes": [
            {"id": m.id, "name": m.name, "description": m.description} for m in modes
        ],
    }
