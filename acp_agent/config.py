"""The configuration: providers, models, limits, logging.

A TOML file validated with pydantic (unknown keys are errors, every error names the file and
the key path), or, with no file, a configuration derived from the environment:
`OPENAI_API_KEY` selects OpenAI, otherwise the offline `echo` provider.

This module imports pydantic, so the server loads it after answering `initialize`.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    Tag,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from .local_addresses import is_local_url
from .paths import config_path

CONFIG_ENV_VAR = "ACP_AGENT_CONFIG"
MODEL_ENV_VAR = "ACP_AGENT_MODEL"
NO_INSTRUCTIONS_ENV_VAR = "ACP_AGENT_NO_PROJECT_INSTRUCTIONS"
"""Set to 1 (`acp-agent run --no-project-instructions` does): no instruction files are read."""
DEFAULT_OPENAI_MODEL = "gpt-4.1"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
DEFAULT_CONTEXT_WINDOW = 128_000

ThoughtLevel = Literal["off", "low", "medium", "high"]
Speed = Literal["standard", "fast"]


class ConfigError(Exception):
    """A configuration that cannot be used; the message is ready to show to a user."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_PREFIXES = re.compile(
    r"(?:sk-|sk_|sk-ant-|ghp_|gho_|github_pat_|xox[abp]-|AKIA|ASIA|AIza|gsk_|xai-|hf_|pplx-)"
)


def _key_variable(name: str | None) -> str | None:
    """`api_key_env` must name a variable; a key pasted there is refused without being
    repeated (the message never holds the value)."""
    if name is None:
        return None
    mixed = any(c.islower() for c in name) and any(c.isupper() for c in name)
    looks_like_key = (
        _KEY_PREFIXES.match(name) is not None
        or (len(name) >= 32 and mixed and any(c.isdigit() for c in name))
        or (not _VARIABLE_NAME.fullmatch(name) and len(name) >= 16 and " " not in name)
    )
    if looks_like_key:
        raise ValueError(
            "this looks like an API key itself, not the name of the environment variable "
            "that holds one: put the key in a variable (export MY_KEY=...) and write the "
            'variable\'s name here, e.g. api_key_env = "OPENAI_API_KEY"'
        )
    if not _VARIABLE_NAME.fullmatch(name):
        raise ValueError(
            "not the name of an environment variable (letters, digits and _, not starting "
            'with a digit), e.g. api_key_env = "OPENAI_API_KEY"'
        )
    return name


KeyVariable = Annotated[str | None, AfterValidator(_key_variable)]


class LongContextPrices(_Strict):
    """The rates of a request whose input passes `above` tokens: they apply to all its
    tokens, not just the excess (Anthropic's and Google's long-context prices)."""

    above: StrictInt = Field(gt=0, description="Input tokens (cache included) past which.")
    input: StrictFloat = Field(ge=0, description="Uncached input tokens.")
    output: StrictFloat = Field(ge=0, description="Generated tokens, reasoning included.")
    cache_read: StrictFloat | None = Field(None, ge=0, description="Input tokens read from cache.")
    cache_write: StrictFloat | None = Field(
        None, ge=0, description="Input tokens written to cache."
    )


class Prices(_Strict):
    """US dollars per million tokens."""

    input: StrictFloat = Field(ge=0, description="Uncached input tokens.")
    output: StrictFloat = Field(ge=0, description="Generated tokens, reasoning included.")
    cache_read: StrictFloat | None = Field(None, ge=0, description="Input tokens read from cache.")
    cache_write: StrictFloat | None = Field(
        None, ge=0, description="Input tokens written to cache."
    )
    long_context: LongContextPrices | None = Field(
        None, description="Higher rates for requests with a long input, if the model has them."
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
    fast: StrictBool = Field(
        False,
        description="The model can be served faster at a higher price (OpenAI's priority "
        'processing, `service_tier = "priority"`): the editor offers a Speed choice. Other '
        "provider types leave it unsent.",
    )
    prompt_adjustment: str | None = Field(
        None,
        description="A short section added to the built-in system prompt for this model, in "
        "place of its family's built-in one (e.g. how it should call tools).",
    )
    prices: Prices | None = Field(
        None, description="Token prices, to report the cost of a session."
    )
    documents: StrictBool | None = Field(
        None,
        description="The model reads PDF documents (Anthropic `document` blocks, OpenAI file "
        "inputs); a PDF for a model that does not gets a note instead. Unset: true for "
        "anthropic and openai providers, false for other servers.",
    )
    images: StrictBool | None = Field(
        None,
        description="The model reads images; an image for a model that does not gets a note "
        "instead. Unset: what the model catalog says, else true.",
    )

    # Filled in by `catalog.complete`: where each fact came from, and what the catalog noted.
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _notes: tuple[str, ...] = PrivateAttr(())

    @property
    def sources(self) -> dict[str, str]:
        """Where each fact (context_window, max_output_tokens, reasoning, prices)
        came from: "config", "default", or the catalog entry ("models.dev openai/gpt-4.1");
        empty until `acp_agent.catalog.with_catalog` has run."""
        return dict(self._sources)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the catalog noted about this model (e.g. no prices for a local server)."""
        return self._notes


_DOCUMENT_READERS = frozenset({"anthropic", "anthropic-bedrock", "anthropic-vertex", "openai"})
"""Provider types whose models read PDFs unless their config says otherwise."""


def _reads_documents(provider_type: str, models: tuple[ModelConfig, ...], model_id: str) -> bool:
    model = next((model for model in models if model.id == model_id), None)
    if model is not None and model.documents is not None:
        return model.documents
    return provider_type in _DOCUMENT_READERS


def _reads_images(models: tuple[ModelConfig, ...], model_id: str) -> bool:
    model = next((model for model in models if model.id == model_id), None)
    return model is None or model.images is not False


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


class _ServedModels(_Strict):
    """What a vendor API's section tells the provider beyond its fields: what its models
    read, and the key `acp-agent login` stored for it (`with_stored_keys`)."""

    if TYPE_CHECKING:  # each section declares these fields itself, in its own order
        type: str
        models: tuple[ModelConfig, ...]

    _stored_key: Callable[[], str | None] | None = PrivateAttr(None)
    _editor_headers: dict[str, str] | None = PrivateAttr(None)

    def editor_headers(self) -> dict[str, str] | None:
        """The exact headers the editor routed this provider with (`providers/set`, never
        saved), sent instead of any key of ours; None when it is not routed."""
        return self._editor_headers

    def reads_documents(self, model_id: str) -> bool:
        """Whether the model is sent documents: its `documents`, else this type's default."""
        return _reads_documents(self.type, self.models, model_id)

    def reads_images(self, model_id: str) -> bool:
        """Whether the model is sent images: its `images` (config or catalog), else yes."""
        return _reads_images(self.models, model_id)

    def stored_key(self) -> str | None:
        """The key `acp-agent login` stored for this provider (read when asked): the last
        resort, after the config and the environment."""
        return self._stored_key() if self._stored_key is not None else None

    @model_validator(mode="after")
    def _usable(self) -> _ServedModels:
        self._check_settings()
        if not self.models:
            raise ValueError("models: list at least one model")
        return self

    def _check_settings(self) -> None:
        """`ValueError` for settings of the section that cannot work together (checked
        first)."""


class OpenAIProviderConfig(_ServedModels):
    """OpenAI Chat Completions, or any server that speaks it (Ollama, vLLM, LiteLLM ...)."""

    type: Literal["openai", "openai-compatible", "azure-openai"]
    base_url: str | None = Field(
        None, description="API root, e.g. http://localhost:11434/v1; the vendor's if unset."
    )
    api_version: str | None = Field(None, description="Azure OpenAI only: the API version.")
    api_key_env: KeyVariable = Field(
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

    def _check_settings(self) -> None:
        if self.type in ("openai-compatible", "azure-openai") and not self.base_url:
            raise ValueError(f"an {self.type} provider needs base_url")

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None:
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return env.get(self.api_key_env) or None
        return None


class AnthropicProviderConfig(_ServedModels):
    """Anthropic's Messages API, directly or through Amazon Bedrock or Google Vertex AI."""

    type: Literal["anthropic", "anthropic-bedrock", "anthropic-vertex"]
    base_url: str | None = Field(None, description="API root; the vendor's if unset.")
    api_key_env: KeyVariable = Field(
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

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None:
        if self.api_key:
            return self.api_key
        return env.get(self.api_key_env or "ANTHROPIC_API_KEY") or None


class PluginProviderConfig(_Strict):
    """A provider type an installed package adds (entry point group `acp_agent.providers`,
    see `acp_agent.plugins`). A plugin with settings of its own subclasses this (its
    `config_model`); these are the ones every provider has."""

    type: str = Field(min_length=1, description="The plugin's provider type.")
    base_url: str | None = Field(None, description="API root, if the plugin talks to one.")
    api_key_env: KeyVariable = Field(
        None, description="Environment variable holding the API key (preferred over api_key)."
    )
    api_key: str | None = Field(None, description="The API key itself; prefer api_key_env.")
    models: tuple[ModelConfig, ...] = Field(description="The models offered from this provider.")
    retry: RetryConfig = RetryConfig()

    @model_validator(mode="wrap")
    @classmethod
    def _by_plugin(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Validate the section with the plugin's own model (importing the plugin)."""
        if cls is not PluginProviderConfig or not isinstance(data, dict):
            return handler(data)
        from . import plugins

        provider_type = data.get("type")
        if not isinstance(provider_type, str) or not provider_type:
            raise ValueError(f"type: missing; {_misspelt_type(data)}{_valid_types()}")
        if plugins.find(provider_type) is None:
            raise ValueError(
                f"unknown provider type {provider_type!r}; {_valid_types(provider_type)}"
            )
        try:
            model = _plugin_model(provider_type)
        except plugins.PluginError as exc:
            broken = BrokenPluginConfig.model_validate(data)
            broken._load_error = str(exc)
            return broken
        if model is PluginProviderConfig:
            return handler(data)
        return model.model_validate(data)

    @property
    def load_error(self) -> str | None:
        """Why the plugin cannot be used; None when it loaded."""
        return None

    def resolve_api_key(self, env: Mapping[str, str]) -> str | None:
        if self.api_key:
            return self.api_key
        return env.get(self.api_key_env) or None if self.api_key_env else None

    def stored_key(self) -> str | None:
        """Plugins keep their own keys: none is stored by `acp-agent login` for them."""
        return None


class BrokenPluginConfig(PluginProviderConfig):
    """The section of a provider whose plugin failed to load: kept (its keys unchecked), so
    the other providers still work and its models say why they cannot be used."""

    model_config = ConfigDict(extra="allow", frozen=True)
    _load_error: str = PrivateAttr("the plugin failed to load")

    @property
    def load_error(self) -> str | None:
        return self._load_error


def _plugin_model(provider_type: str) -> type[PluginProviderConfig]:
    """The model the plugin of `provider_type` has its sections validated with: its
    `config_model`, else `PluginProviderConfig`.

    Raises `plugins.PluginError` when the plugin cannot be loaded or its `config_model` is
    no `PluginProviderConfig`.
    """
    from . import plugins

    # As the plugin gave it: `ProviderPlugin`'s annotation is a promise plugins may break.
    model: object = plugins.load(provider_type).config_model
    if model is None:
        return PluginProviderConfig
    if isinstance(model, type) and issubclass(model, PluginProviderConfig):
        return model
    installed = plugins.find(provider_type)
    origin = installed.origin if installed is not None else repr(provider_type)
    raise plugins.PluginError(
        f"plugin {origin}: config_model must be a subclass of acp_agent.config.PluginProviderConfig"
    )


def _plugin_model_or_base(provider_type: str) -> type[PluginProviderConfig]:
    """`_plugin_model`, or the base model when the plugin cannot be used: the keys an error
    message suggests."""
    from . import plugins

    try:
        return _plugin_model(provider_type)
    except plugins.PluginError:
        return PluginProviderConfig


BUILTIN_PROVIDER_TYPES: dict[str, str] = {
    "echo": "echo",
    "openai": "openai",
    "openai-compatible": "openai",
    "azure-openai": "openai",
    "anthropic": "anthropic",
    "anthropic-bedrock": "anthropic",
    "anthropic-vertex": "anthropic",
}
"""The built-in provider types, each with the tag of its config model."""


def _provider_tag(value: Any) -> str:
    provider_type = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return (
        BUILTIN_PROVIDER_TYPES.get(provider_type, "plugin")
        if isinstance(provider_type, str)
        else "plugin"
    )


def _misspelt_type(section: dict[str, Any]) -> str:
    """`tpye = "echo"`: name the key meant as `type`, which no other message would."""
    import difflib

    keys = [key for key in section if isinstance(key, str)]
    close = difflib.get_close_matches("type", keys, n=1, cutoff=0.6)
    return f"{close[0]!r} is not a key: did you mean 'type'? " if close else ""


def _valid_types(wrong: str | None = None) -> str:
    import difflib

    from . import plugins

    added = sorted(plugins.installed())
    known = [*BUILTIN_PROVIDER_TYPES, *added]
    close = difflib.get_close_matches(wrong, known, n=1) if wrong else []
    hint = f"did you mean {close[0]!r}? " if close else ""
    listed = ", ".join(BUILTIN_PROVIDER_TYPES)
    if added:
        listed += "; from installed plugins: " + ", ".join(added)
    return f"{hint}the valid types are {listed}"


ProviderConfig = Annotated[
    Annotated[EchoProviderConfig, Tag("echo")]
    | Annotated[OpenAIProviderConfig, Tag("openai")]
    | Annotated[AnthropicProviderConfig, Tag("anthropic")]
    | Annotated[PluginProviderConfig, Tag("plugin")],
    Discriminator(_provider_tag),
]


class InstructionsConfig(_Strict):
    """The project's instruction files (`AGENTS.md` …) the model is given."""

    enabled: StrictBool = Field(
        True,
        description="Give the model the user's and the project's instruction files (AGENTS.md, "
        "else CLAUDE.md or GEMINI.md, from the project root down to the working directory).",
    )
    budget: StrictInt = Field(
        32 * 1024,
        ge=1024,
        le=1024 * 1024,
        description="Bytes of instruction files in the system prompt; the nearest files are "
        "kept whole first, a file cut short says so.",
    )
    extra_files: tuple[str, ...] = Field(
        (),
        description="Other files read in every folder too (e.g. '.rules', 'CONVENTIONS.md', "
        "'.github/copilot-instructions.md').",
    )

    @field_validator("extra_files")
    @classmethod
    def _inside_each_folder(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            parts = name.replace("\\", "/").split("/")
            if not name or name.startswith(("/", "~")) or ".." in parts or "\0" in name:
                raise ValueError(f"{name!r}: give a file name, or a path below each folder")
        return names


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
    trusted: StrictBool = Field(
        False,
        description="Believe the server's read-only annotations: its tools marked readOnlyHint "
        "run without asking and are offered in read-only mode. Untrusted (the default), every "
        "tool of it asks like a command. The editor's server of this name is trusted too when "
        "it runs the same command and args (or has the same url).",
    )

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
    title_model: str | None = Field(
        None,
        description="'provider/model' that writes each session's title (a few words) from its "
        "first prompt, beside the turn; a small, cheap model does. Unset: the title is the first "
        "prompt, shortened.",
    )
    max_turn_requests: StrictInt = Field(
        50, gt=0, description="Model calls allowed in one prompt turn before it stops."
    )
    subagent_model: str | None = Field(
        None,
        description="'provider/model' that subagents (the `agent` tool) use unless the call "
        "names one; unset: the model of the session that starts them.",
    )
    subagent_depth: StrictInt = Field(
        1,
        ge=0,
        le=5,
        description="How deep subagents may nest: 1 lets a session start subagents that "
        "cannot start their own; 0 offers no `agent` tool.",
    )
    subagent_concurrency: StrictInt = Field(
        4, ge=1, le=32, description="Subagents of one reply that run at the same time."
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
    system_prompt: str | None = Field(
        None,
        description="Replaces the built-in system prompt ({cwd} and {today} are filled in); "
        "the project's instructions and skills still follow it.",
    )
    instructions: InstructionsConfig = Field(
        InstructionsConfig(), description="The project's instruction files the model is given."
    )
    shell_timeout: StrictFloat = Field(
        120.0, gt=0, le=86_400, description="Seconds a shell command may run before it is killed."
    )
    mention_max_bytes: StrictInt = Field(
        256 * 1024,
        ge=1024,
        le=16 * 1024 * 1024,
        description="Bytes of a mentioned file (`@file` in the editor) given to the model; a "
        "longer file is cut there, with a note saying how to read on.",
    )
    max_live_sessions: StrictInt = Field(
        64,
        ge=1,
        le=100_000,
        description="Sessions kept open at once (each holds its log and MCP servers open); past "
        "it, the least recently used idle one is closed, and opened again from the store when "
        "its id is used.",
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
    session_retention_days: StrictInt = Field(
        90,
        ge=0,
        le=100_000,
        description="Stored sessions (editor sessions and `acp-agent run` runs) inactive for "
        "longer are removed when the agent starts, in the background; 0 keeps them forever.",
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
    def _chosen_models_exist(self) -> AgentConfig:
        for key, choice in (
            ("default_model", self.default_model),
            ("title_model", self.title_model),
            ("subagent_model", self.subagent_model),
        ):
            if choice is not None:
                try:
                    self.find_model(choice)
                except ValueError as exc:
                    raise ValueError(f"{key}: {exc}") from None
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


def load_config(
    path: str | None,
    env: Mapping[str, str] | None = None,
    stored: Mapping[str, str] | None = None,
) -> AgentConfig:
    """The config file at `path` (or `$ACP_AGENT_CONFIG`, or the user's config file if it
    exists: `acp_agent.paths`), else one derived from `env`.

    `stored`: the keys `acp-agent login` stored, by provider name (`credentials.py`, looked
    up live): each provider falls back on its own when neither the config nor `env` gives
    a key, and without a config file a stored key makes its provider appear."""
    env = os.environ if env is None else env
    path = config_path(path, env)
    if path is None:
        return config_from_env(env, stored)
    return with_stored_keys(load_config_file(Path(path)), stored)


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
        from ._config_errors import describe_validation_error

        message = describe_validation_error(
            path, exc, data, root=AgentConfig, plugin_model=_plugin_model_or_base
        )
        raise ConfigError(message) from None
    return config


def config_from_env(env: Mapping[str, str], stored: Mapping[str, str] | None = None) -> AgentConfig:
    """Providers for the API keys found in `env` or stored by `acp-agent login` (`stored`);
    the offline echo provider if none.

    `ACP_AGENT_MODEL` names the model of the first provider found (OpenAI before Anthropic).
    """
    chosen = env.get(MODEL_ENV_VAR) or None
    providers: dict[str, ProviderConfig] = {}
    logged_in = [name for name in ("openai", "anthropic") if stored and stored.get(name)]
    # A local server (Ollama, LM Studio, vLLM) needs no key: its address is enough.
    local_server = is_local_url(env.get("OPENAI_BASE_URL"))
    if env.get("OPENAI_API_KEY") or "openai" in logged_in or local_server:
        providers["openai"] = OpenAIProviderConfig(
            type="openai",
            base_url=env.get("OPENAI_BASE_URL") or None,
            api_key_env="OPENAI_API_KEY",
            models=(ModelConfig(id=chosen or DEFAULT_OPENAI_MODEL),),
        )
    if env.get("ANTHROPIC_API_KEY") or "anthropic" in logged_in:
        model = (not providers and chosen) or DEFAULT_ANTHROPIC_MODEL
        providers["anthropic"] = AnthropicProviderConfig(
            type="anthropic",
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            api_key_env="ANTHROPIC_API_KEY",
            models=(ModelConfig(id=model),),  # its facts come from the catalog
        )
    if providers:
        keys = " and ".join(_key_source(name, env, logged_in) for name in providers)
        config = AgentConfig(providers=providers).from_source(f"environment ({keys})")
        return with_stored_keys(config, stored)
    echo = EchoProviderConfig(type="echo")
    return AgentConfig(providers={"echo": echo}).from_source("built-in echo (no API key found)")


def _key_source(name: str, env: Mapping[str, str], logged_in: list[str]) -> str:
    """Where the environment-derived provider `name` gets its key, for the log."""
    variable = f"{name.upper()}_API_KEY"
    if env.get(variable):
        return variable
    if name in logged_in:
        return f"the {name} key from `acp-agent login`"
    url = env.get(f"{name.upper()}_BASE_URL")
    return f"{name.upper()}_BASE_URL={url}, a local server: no key needed, a placeholder is sent"


def with_stored_keys(config: AgentConfig, stored: Mapping[str, str] | None) -> AgentConfig:
    """`config`, its providers falling back on the keys in `stored` (looked up when asked)."""
    if stored is None:
        return config
    for name, provider in config.providers.items():
        if isinstance(provider, _ServedModels):
            provider._stored_key = functools.partial(_lookup, stored, name)
    return config


def _lookup(stored: Mapping[str, str], name: str) -> str | None:
    return stored.get(name) or None
