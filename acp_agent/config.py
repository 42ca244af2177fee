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

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

CONFIG_ENV_VAR = "ACP_AGENT_CONFIG"
MODEL_ENV_VAR = "ACP_AGENT_MODEL"
DEFAULT_OPENAI_MODEL = "gpt-4.1"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
DEFAULT_CONTEXT_WINDOW = 128_000

ThoughtLevel = Literal["off", "low", "medium", "high"]


class ConfigError(Exception):
    """A configuration that cannot be used; the message is ready to show to a user."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Prices(_Strict):
    """US dollars per million tokens."""

    input: StrictFloat = Field(ge=0, description="Uncached input tokens.")
    output: StrictFloat = Field(ge=0, description="Generated tokens, reasoning included.")
    cache_read: StrictFloat | None = Field(None, ge=0, description="Input tokens read from cache.")
    cache_write: StrictFloat | None = Field(
        None, ge=0, description="Input tokens written to cache."
    )


class ModelConfig(_Strict):
    id: str = Field(min_length=1, description="The model name the vendor API expects.")
    name: str | None = Field(None, description="Display name in the editor's model picker.")
    context_window: StrictInt = Field(
        DEFAULT_CONTEXT_WINDOW, gt=0, description="Tokens the model accepts in one request."
    )
    max_output_tokens: StrictInt | None = Field(
        None, gt=0, description="Cap on generated tokens per model call; vendor default if unset."
    )
    api: Literal["chat", "responses"] = Field(
        "chat",
        description="OpenAI only: Chat Completions, or the Responses API (reasoning models).",
    )
    reasoning: StrictBool = Field(
        False, description="The model accepts a reasoning effort / thinking budget."
    )
    thought_level: ThoughtLevel = Field(
        "medium", description="Default reasoning effort for reasoning models."
    )
    prices: Prices | None = Field(
        None, description="Token prices, to report the cost of a session."
    )


class RetryConfig(_Strict):
    """Retries of rate limits (429), overload (529), server errors (5xx) and lost connections."""

    max_attempts: StrictInt = Field(
        5, ge=1, le=20, description="Tries per model call, the first included."
    )
    max_total_seconds: StrictFloat = Field(
        120.0, gt=0, description="Give up when the next wait would pass this many seconds in all."
    )
    initial_delay: StrictFloat = Field(1.0, gt=0, description="Seconds before the first retry.")
    max_delay: StrictFloat = Field(
        30.0, gt=0, description="Longest single wait, retry-after included."
    )
    min_retry_after: StrictFloat = Field(
        0.5, ge=0, description="Floor for a server's retry-after, so 0 cannot cause a storm."
    )


class EchoProviderConfig(_Strict):
    """The offline provider: streams the prompt back; `@tool NAME {json}` scripts a tool call."""

    type: Literal["echo"]
    models: tuple[ModelConfig, ...] = (ModelConfig(id="echo", context_window=32_768),)
    retry: RetryConfig = RetryConfig()
    chunk_delay: StrictFloat = Field(
        0.0, ge=0, le=10, description="Seconds between streamed words, to watch streaming."
    )

    @model_validator(mode="after")
    def _usable(self) -> EchoProviderConfig:
        if not self.models:
            raise ValueError("models: list at least one model")
        return self


class OpenAIProviderConfig(_Strict):
    """OpenAI Chat Completions, or any server that speaks it (Ollama, vLLM, LiteLLM ...)."""

    type: Literal["openai", "openai-compatible", "azure-openai"]
    base_url: str | None = Field(
        None, description="API root, e.g. http://localhost:11434/v1; the vendor's if unset."
    )
    api_version: str | None = Field(None, description="Azure OpenAI only: the API version.")
    api_key_env: str | None = Field(
        None, description="Environment variable holding the API key (preferred over api_key)."
    )
    api_key: str | None = Field(None, description="The API key itself; prefer api_key_env.")
    timeout: StrictFloat = Field(600.0, gt=0, description="Seconds before a silent request fails.")
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_completion_tokens",
        description="Request field that carries max_output_tokens (older servers: max_tokens).",
    )
    models: tuple[ModelConfig, ...] = Field(description="The models offered from this provider.")
    retry: RetryConfig = RetryConfig()

    @model_validator(mode="after")
    def _usable(self) -> OpenAIProviderConfig:
        if self.type in ("openai-compatible", "azure-openai") and not self.base_url:
            raise ValueError(f"an {self.type} provider needs base_url")
        if not self.models:
            raise ValueError("models: list at least one model")
        return self

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None:
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return env.get(self.api_key_env) or None
        return None


class AnthropicProviderConfig(_Strict):
    """Anthropic's Messages API, directly or through Amazon Bedrock or Google Vertex AI."""

    type: Literal["anthropic", "anthropic-bedrock", "anthropic-vertex"]
    base_url: str | None = Field(None, description="API root; the vendor's if unset.")
    api_key_env: str | None = Field(
        None,
        description=(
            "Environment variable holding the API key (default ANTHROPIC_API_KEY); for Bedrock "
            "a bearer key, for Vertex an access token (cloud credentials otherwise)."
        ),
    )
    api_key: str | None = Field(None, description="The API key itself; prefer api_key_env.")
    timeout: StrictFloat = Field(600.0, gt=0, description="Seconds before a silent request fails.")
    region: str | None = Field(None, description="Bedrock / Vertex region.")
    project_id: str | None = Field(None, description="Vertex only: the Google Cloud project.")
    prompt_caching: StrictBool = Field(
        True, description="Mark system prompt, tools and history as cacheable."
    )
    models: tuple[ModelConfig, ...] = Field(description="The models offered from this provider.")
    retry: RetryConfig = RetryConfig()

    @model_validator(mode="after")
    def _usable(self) -> AnthropicProviderConfig:
        if not self.models:
            raise ValueError("models: list at least one model")
        return self

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None:
        if self.api_key:
            return self.api_key
        return env.get(self.api_key_env or "ANTHROPIC_API_KEY") or None


ProviderConfig = Annotated[
    EchoProviderConfig | OpenAIProviderConfig | AnthropicProviderConfig,
    Field(discriminator="type"),
]


class ShellEnvironmentPolicy(_Strict):
    """What commands the model runs (and other children) inherit of our environment.

    Applied in this order, as codex's `shell_environment_policy` is: inherit, default
    excludes, exclude, set, include_only. The variables our providers read their keys from
    are never inherited, whatever this says (see `acp_agent.child_env`).
    """

    inherit: Literal["all", "core", "none"] = Field(
        "all",
        description="Start from all our variables, the core few (HOME, PATH, USER, LANG ...), "
        "or none.",
    )
    ignore_default_excludes: StrictBool = Field(
        False,
        description="Keep variables whose names contain KEY, SECRET, TOKEN, PASSWORD or "
        "CREDENTIAL (dropped by default; our own key variables are dropped regardless).",
    )
    exclude: tuple[str, ...] = Field(
        (), description="Glob patterns (case-insensitive) of names to drop, e.g. 'AWS_*'."
    )
    set: dict[str, str] = Field(
        default_factory=dict,
        description="Variables set to fixed values, over what was inherited.",
    )
    include_only: tuple[str, ...] = Field(
        (),
        description="If not empty, keep only names matching one of these glob patterns "
        "(case-insensitive), set ones included.",
    )

    @field_validator("exclude", "include_only")
    @classmethod
    def _patterns(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            if not pattern or "=" in pattern or "\0" in pattern:
                raise ValueError(f"{pattern!r} is not a pattern of variable names")
        return patterns

    @field_validator("set")
    @classmethod
    def _variables(cls, variables: dict[str, str]) -> dict[str, str]:
        for name, value in variables.items():
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"{name!r} is not a variable name")
            if "\0" in value:
                raise ValueError(f"{name}: a value cannot hold a NUL character")
        return variables


class McpServerConfig(_Strict):
    """An MCP server whose tools and prompts every session gets (`[mcp_servers.<name>]`).

    `stdio` starts `command` with `args` in the session's directory, with the core few of
    our variables (never our keys) plus `env`; `http` (streamable HTTP) and `sse` connect to
    `url` with `headers`. A server the editor gives a session under the same name wins.
    """

    type: Literal["stdio", "http", "sse"] = Field(
        "stdio", description="How to reach the server: a local command, streamable HTTP or SSE."
    )
    command: str | None = Field(None, description="stdio: the program to start.")
    args: tuple[str, ...] = Field((), description="stdio: its arguments.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="stdio: variables set for the server, over the core few it inherits.",
    )
    url: str | None = Field(None, description="http, sse: the server's endpoint URL.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="http, sse: HTTP headers sent with every request."
    )
    enabled: StrictBool = Field(True, description="false: keep the entry but do not connect.")

    @model_validator(mode="after")
    def _usable(self) -> McpServerConfig:
        if self.type == "stdio":
            if not self.command:
                raise ValueError("a stdio server needs command")
            if self.url is not None or self.headers:
                raise ValueError("url and headers apply to http and sse servers only")
        else:
            if not self.url:
                raise ValueError(f"an {self.type} server needs url")
            if self.command is not None or self.args or self.env:
                raise ValueError("command, args and env apply to stdio servers only")
        for name, value in self.env.items():
            if not name or "=" in name or "\0" in name or "\0" in value:
                raise ValueError(f"env: {name!r} is not a variable name and value")
        return self


class AgentConfig(_Strict):
    default_model: str | None = Field(
        None,
        description="'provider/model' used by new sessions; the first configured model if unset.",
    )
    max_turn_requests: StrictInt = Field(
        50, gt=0, description="Model calls allowed in one prompt turn before it stops."
    )
    compaction_threshold: StrictFloat = Field(
        0.8,
        ge=0.1,
        le=0.95,
        description="Share of the model's context window the next request (history plus "
        "prompt) may take before older turns are summarised to make room.",
    )
    compaction_keep_turns: StrictInt = Field(
        2,
        ge=1,
        le=100,
        description="Recent user turns (the running one included) kept word for word when "
        "older turns are summarised.",
    )
    system_prompt: str | None = Field(None, description="Replaces the built-in system prompt.")
    shell_timeout: StrictFloat = Field(
        120.0, gt=0, le=86_400, description="Seconds a shell command may run before it is killed."
    )
    log_file: str | None = Field(None, description="Write logs here instead of stderr.")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Least severe log messages written."
    )
    state_dir: str | None = Field(
        None,
        description="Where sessions are stored; the platform's user state directory if unset "
        "($XDG_STATE_HOME/acp-agent, ~/.local/state/acp-agent).",
    )
    shell_environment_policy: ShellEnvironmentPolicy = Field(
        ShellEnvironmentPolicy(),
        description="What commands the model runs inherit of our environment (never our keys).",
    )
    providers: dict[str, ProviderConfig] = Field(min_length=1)
    mcp_servers: dict[str, McpServerConfig] = Field(
        default_factory=dict,
        description="MCP servers, by name, whose tools and prompts every session gets.",
    )
    mcp_connect_timeout: StrictFloat = Field(
        5.0,
        gt=0,
        le=300,
        description="Seconds each MCP server has to connect; a slower one is reported as "
        "failed, the session goes on without it and it is retried on next use.",
    )
    mcp_allow_sampling: StrictBool = Field(
        False,
        description="Let MCP servers ask our model for completions (sampling); declined if false.",
    )

    _source: str = PrivateAttr("built-in")

    @property
    def source(self) -> str:
        """Where this configuration came from, for the log."""
        return self._source

    def from_source(self, source: str) -> AgentConfig:
        self._source = source
        return self

    @field_validator("system_prompt")
    @classmethod
    def _known_placeholders(cls, prompt: str | None) -> str | None:
        if prompt is not None:
            try:
                prompt.format(cwd="", today="")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"cannot fill in {exc}: the placeholders are {{cwd}} and {{today}}; "
                    "write {{ and }} for literal braces"
                ) from None
        return prompt

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
        config = AgentConfig.model_validate(data).from_source(str(path))
    except ValidationError as exc:
        raise ConfigError(_describe_validation_error(path, exc)) from None
    return config


def config_from_env(env: Mapping[str, str]) -> AgentConfig:
    """Providers for the API keys found in `env`; the offline echo provider if none.

    `ACP_AGENT_MODEL` names the model of the first provider found (OpenAI before Anthropic).
    """
    chosen = env.get(MODEL_ENV_VAR) or None
    providers: dict[str, ProviderConfig] = {}
    if env.get("OPENAI_API_KEY"):
        providers["openai"] = OpenAIProviderConfig(
            type="openai",
            base_url=env.get("OPENAI_BASE_URL") or None,
            api_key_env="OPENAI_API_KEY",
            models=(ModelConfig(id=chosen or DEFAULT_OPENAI_MODEL),),
        )
    if env.get("ANTHROPIC_API_KEY"):
        model = (not providers and chosen) or DEFAULT_ANTHROPIC_MODEL
        providers["anthropic"] = AnthropicProviderConfig(
            type="anthropic",
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            api_key_env="ANTHROPIC_API_KEY",
            models=(ModelConfig(id=model, context_window=200_000, reasoning=True),),
        )
    if providers:
        keys = " and ".join(f"{name.upper()}_API_KEY" for name in providers)
        return AgentConfig(providers=providers).from_source(f"environment ({keys})")
    echo = EchoProviderConfig(type="echo")
    return AgentConfig(providers={"echo": echo}).from_source("built-in echo (no API key found)")


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
