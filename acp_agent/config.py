"""The configuration: providers, models, limits, logging.

A TOML file validated with pydantic (unknown keys are errors, every error names the file and
the key path), or, with no file, a configuration derived from the environment:
`OPENAI_API_KEY` selects OpenAI, otherwise the offline `echo` provider.

This module imports pydantic, so the server loads it after answering `initialize`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CONFIG_ENV_VAR = "ACP_AGENT_CONFIG"
MODEL_ENV_VAR = "ACP_AGENT_MODEL"
DEFAULT_OPENAI_MODEL = "gpt-4.1"
DEFAULT_CONTEXT_WINDOW = 128_000


class ConfigError(Exception):
    """A configuration that cannot be used; the message is ready to show to a user."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Strict):
    id: str = Field(min_length=1, description="The model name the vendor API expects.")
    context_window: int = Field(
        DEFAULT_CONTEXT_WINDOW, gt=0, description="Tokens the model accepts in one request."
    )
    max_output_tokens: int | None = Field(
        None, gt=0, description="Cap on generated tokens per model call; vendor default if unset."
    )


class EchoProviderConfig(_Strict):
    """The offline provider: streams the prompt back; `@tool NAME {json}` scripts a tool call."""

    type: Literal["echo"]
    models: tuple[ModelConfig, ...] = (ModelConfig(id="echo", context_window=32_768),)
    chunk_delay: float = Field(
        0.0, ge=0, le=10, description="Seconds between streamed words, to watch streaming."
    )


class OpenAIProviderConfig(_Strict):
    """OpenAI Chat Completions, or any server that speaks it (Ollama, vLLM, LiteLLM ...)."""

    type: Literal["openai", "openai-compatible"]
    base_url: str | None = Field(
        None, description="API root, e.g. http://localhost:11434/v1; the vendor's if unset."
    )
    api_key_env: str | None = Field(
        None, description="Environment variable holding the API key (preferred over api_key)."
    )
    api_key: str | None = Field(None, description="The API key itself; prefer api_key_env.")
    timeout: float = Field(600.0, gt=0, description="Seconds before a silent request fails.")
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_completion_tokens",
        description="Request field that carries max_output_tokens (older servers: max_tokens).",
    )
    models: tuple[ModelConfig, ...] = Field(description="The models offered from this provider.")

    @model_validator(mode="after")
    def _usable(self) -> OpenAIProviderConfig:
        if self.type == "openai-compatible" and not self.base_url:
            raise ValueError("an openai-compatible provider needs base_url")
        if not self.models:
            raise ValueError("models: list at least one model")
        return self

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None:
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return env.get(self.api_key_env) or None
        return None


ProviderConfig = Annotated[
    EchoProviderConfig | OpenAIProviderConfig, Field(discriminator="type")
]


class AgentConfig(_Strict):
    default_model: str | None = Field(
        None,
        description="'provider/model' used by new sessions; the first configured model if unset.",
    )
    max_turn_requests: int = Field(
        50, gt=0, description="Model calls allowed in one prompt turn before it stops."
    )
    system_prompt: str | None = Field(None, description="Replaces the built-in system prompt.")
    log_file: str | None = Field(None, description="Write logs here instead of stderr.")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    providers: dict[str, ProviderConfig] = Field(min_length=1)

    source: str = Field("built-in", exclude=True, description="Where this configuration came from.")

    @model_validator(mode="after")
    def _default_model_exists(self) -> AgentConfig:
        if self.default_model is not None:
            try:
                self.find_model(self.default_model)
            except ValueError as exc:
                raise ValueError(f"default_model: {exc}") from None
        return self

    def model_choices(self) -> list[tuple[str, ProviderConfig, ModelConfig]]:
        """Every configured model as ('provider/model', provider, model), in file order."""
        return [
            (f"{name}/{model.id}", provider, model)
            for name, provider in self.providers.items()
            for model in provider.models
        ]

    def find_model(self, choice: str) -> tuple[str, ProviderConfig, ModelConfig]:
        for found in self.model_choices():
            if found[0] == choice:
                return found
        known = ", ".join(choice for choice, _, _ in self.model_choices())
        raise ValueError(f"unknown model {choice!r}; configured: {known}")

    @property
    def default_choice(self) -> str:
        return self.default_model or self.model_choices()[0][0]


def load_config(path: str | None, env: Mapping[str, str] | None = None) -> AgentConfig:
    """The config file at `path` (or `$ACP_AGENT_CONFIG`), else one derived from `env`."""
    env = os.environ if env is None else env
    path = path or env.get(CONFIG_ENV_VAR) or None
    if path is None:
        return config_from_env(env)
    return load_config_file(Path(path))


def load_config_file(path: Path) -> AgentConfig:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        config = AgentConfig.model_validate({**data, "source": str(path)})
    except ValidationError as exc:
        raise ConfigError(_describe_validation_error(path, exc)) from None
    return config


def config_from_env(env: Mapping[str, str]) -> AgentConfig:
    model = env.get(MODEL_ENV_VAR) or DEFAULT_OPENAI_MODEL
    if env.get("OPENAI_API_KEY"):
        openai = OpenAIProviderConfig(
            type="openai",
            base_url=env.get("OPENAI_BASE_URL") or None,
            api_key_env="OPENAI_API_KEY",
            models=(ModelConfig(id=model),),
        )
        return AgentConfig(providers={"openai": openai}, source="environment (OPENAI_API_KEY)")
    echo = EchoProviderConfig(type="echo")
    return AgentConfig(providers={"echo": echo}, source="built-in echo (no API key found)")


def _describe_validation_error(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: invalid configuration"]
    for error in exc.errors():
        loc = list(error["loc"])
        if len(loc) > 2 and loc[0] == "providers":
            del loc[2]  # the `type` tag pydantic adds for the discriminated union
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        key = ".".join(str(part) for part in loc)
        lines.append(f"  {key}: {message}" if key else f"  {message}")
    return "\n".join(lines)
