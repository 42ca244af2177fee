"""The shipped example configs load, bad configs fail readably, and the env fallback holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel

from acp_agent.config import (
    AgentConfig,
    ConfigError,
    EchoProviderConfig,
    OpenAIProviderConfig,
    config_from_env,
    load_config,
    load_config_file,
)

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
README = ROOT / "README.md"
SHIPPED = sorted(path for path in CONFIGS.iterdir() if path.is_file())

ECHO = '[providers.echo]\ntype = "echo"\n'
LOCAL = """
[providers.local]
type = "openai-compatible"
base_url = "http://localhost:11434/v1"

[[providers.local.models]]
id = "qwen2.5-coder:7b"
context_window = 32768
"""


def write(tmp_path: Path, text: str, name: str = "agent.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- the shipped examples ------------------------------------------------------------------


def test_the_configs_directory_ships_the_three_examples() -> None:
    assert {path.name for path in SHIPPED} >= {"echo.toml", "openai.toml", "ollama.toml"}


@pytest.mark.parametrize("path", SHIPPED, ids=[path.name for path in SHIPPED])
def test_every_shipped_config_loads_and_its_default_model_resolves(path: Path) -> None:
    config = load_config_file(path)

    choice, _, model = config.find_model(config.default_choice)
    assert choice == config.default_choice
    assert model.context_window > 0
    assert config.source == str(path)


def test_the_echo_example_needs_no_network_and_no_key() -> None:
    config = load_config_file(CONFIGS / "echo.toml")

    assert all(isinstance(p, EchoProviderConfig) for p in config.providers.values())


def test_the_openai_example_reads_its_key_from_the_environment_not_the_file() -> None:
    config = load_config_file(CONFIGS / "openai.toml")
    _, provider, _ = config.find_model(config.default_choice)

    assert isinstance(provider, OpenAIProviderConfig)
    assert provider.type == "openai"
    assert provider.api_key is None
    assert provider.resolve_api_key({"OPENAI_API_KEY": "sk-from-env"}) == "sk-from-env"


def test_the_ollama_example_points_at_the_local_server_with_the_models_context_window() -> None:
    config = load_config_file(CONFIGS / "ollama.toml")
    _, provider, model = config.find_model(config.default_choice)

    assert isinstance(provider, OpenAIProviderConfig)
    assert provider.type == "openai-compatible"
    assert provider.base_url == "http://localhost:11434/v1"
    assert provider.max_tokens_param == "max_tokens"
    assert model.id.startswith("qwen2.5-coder")
    assert model.context_window == 32768


# --- bad configs: a ConfigError naming the file and the key path ---------------------------

BAD_CONFIGS = {
    "unknown top-level key": (f"colour = 'blue'\n{ECHO}", "colour", "unknown key"),
    "unknown provider key": (f"{ECHO}colour = 'blue'\n", "providers.echo.colour", "unknown key"),
    "unknown model key": (
        f"{LOCAL}price = 3\n",
        "providers.local.models.0.price",
        "unknown key",
    ),
    "wrong type for an integer": (
        f"max_turn_requests = 'many'\n{ECHO}",
        "max_turn_requests",
        "valid integer",
    ),
    "wrong type for the models list": (
        '[providers.o]\ntype = "openai"\nmodels = "gpt-4.1"\n',
        "providers.o.models",
        "valid tuple",
    ),
    "wrong choice of log level": (f"log_level = 'loud'\n{ECHO}", "log_level", "'debug'"),
    "negative context window": (
        LOCAL.replace("32768", "-1"),
        "providers.local.models.0.context_window",
        "greater than 0",
    ),
    "zero max_turn_requests": (f"max_turn_requests = 0\n{ECHO}", "max_turn_requests", "greater"),
    "openai-compatible without base_url": (
        LOCAL.replace('base_url = "http://localhost:11434/v1"\n', ""),
        "providers.local",
        "needs base_url",
    ),
    "provider without models": (
        '[providers.o]\ntype = "openai"\n',
        "providers.o.models",
        "Field required",
    ),
    "unknown provider type": (
        '[providers.o]\ntype = "anthropic-v0"\n',
        "providers.o",
        "'anthropic-v0'",
    ),
    "no providers": ("log_level = 'info'\n", "providers", "Field required"),
    "default_model naming an unknown model": (
        f"default_model = 'local/gpt-9'\n{LOCAL}",
        "default_model",
        "unknown model 'local/gpt-9'; configured: local/qwen2.5-coder:7b",
    ),
}


@pytest.mark.parametrize(
    ("text", "key_path", "message"), BAD_CONFIGS.values(), ids=list(BAD_CONFIGS)
)
def test_a_bad_config_is_a_config_error_naming_the_file_and_the_key_path(
    tmp_path: Path, text: str, key_path: str, message: str
) -> None:
    path = write(tmp_path, text)

    with pytest.raises(ConfigError) as caught:
        load_config_file(path)

    first, *problems = str(caught.value).splitlines()
    assert first.startswith(str(path))
    assert any(line.strip().startswith(f"{key_path}: ") for line in problems), problems
    assert message in str(caught.value)


def test_every_problem_in_a_config_is_reported_on_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, f"colour = 1\nmax_turn_requests = -5\n{ECHO}chunk_delay = 99\n")

    with pytest.raises(ConfigError) as caught:
        load_config_file(path)

    keys = [line.strip().split(":")[0] for line in str(caught.value).splitlines()[1:]]
    assert sorted(keys) == ["colour", "max_turn_requests", "providers.echo.chunk_delay"]


def test_invalid_toml_is_a_config_error_naming_the_file_and_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, f"{ECHO}chunk_delay = = 1\n")

    with pytest.raises(ConfigError, match="not valid TOML") as caught:
        load_config_file(path)

    assert str(caught.value).startswith(f"{path}: ")
    assert "line 3" in str(caught.value)


def test_a_missing_config_file_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"

    with pytest.raises(ConfigError) as caught:
        load_config_file(path)

    assert str(caught.value) == f"{path}: config file not found"


def test_a_directory_given_as_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file") as caught:
        load_config_file(tmp_path)

    assert str(caught.value).startswith(str(tmp_path))


@pytest.mark.parametrize(
    "setting", ["max_turn_requests = '5'", "max_turn_requests = true"], ids=["string", "bool"]
)
def test_a_number_written_as_a_string_or_boolean_is_rejected(tmp_path: Path, setting: str) -> None:
    with pytest.raises(ConfigError, match="max_turn_requests"):
        load_config_file(write(tmp_path, f"{setting}\n{ECHO}"))


def test_an_echo_provider_with_an_empty_models_list_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"providers\.echo"):
        load_config_file(write(tmp_path, f"{ECHO}models = []\n"))


# --- no file: the environment decides ------------------------------------------------------


def test_with_nothing_set_the_offline_echo_provider_answers() -> None:
    config = load_config(None, {})

    assert config.default_choice == "echo/echo"
    assert isinstance(config.providers["echo"], EchoProviderConfig)


def test_with_nothing_set_in_the_process_environment_echo_answers() -> None:
    # The autouse fixture in conftest.py cleared every key variable.
    assert load_config(None).default_choice == "echo/echo"


def test_openai_api_key_selects_openai_with_its_default_model() -> None:
    config = load_config(None, {"OPENAI_API_KEY": "sk-test"})

    _, provider, model = config.find_model(config.default_choice)
    assert config.default_choice == "openai/gpt-4.1"
    assert isinstance(provider, OpenAIProviderConfig)
    assert provider.type == "openai"
    assert provider.base_url is None
    assert provider.api_key_env == "OPENAI_API_KEY"
    assert provider.api_key is None  # the key stays in the environment
    assert provider.resolve_api_key({"OPENAI_API_KEY": "sk-test"}) == "sk-test"
    assert model.context_window > 0


def test_openai_base_url_and_acp_agent_model_are_honoured() -> None:
    env = {
        "OPENAI_API_KEY": "bench-key",
        "OPENAI_BASE_URL": "http://127.0.0.1:9999/v1",
        "ACP_AGENT_MODEL": "qwen2.5-coder:7b",
    }

    config = config_from_env(env)

    _, provider, model = config.find_model(config.default_choice)
    assert config.default_choice == "openai/qwen2.5-coder:7b"
    assert isinstance(provider, OpenAIProviderConfig)
    assert provider.base_url == "http://127.0.0.1:9999/v1"
    assert model.id == "qwen2.5-coder:7b"


def test_an_empty_api_key_counts_as_unset() -> None:
    assert load_config(None, {"OPENAI_API_KEY": ""}).default_choice == "echo/echo"


def test_a_base_url_or_model_without_a_key_still_means_echo() -> None:
    # A public one: a local server needs no key (see test_local_servers.py).
    env = {"OPENAI_BASE_URL": "https://llm.example.com/v1", "ACP_AGENT_MODEL": "gpt-4.1"}

    assert load_config(None, env).default_choice == "echo/echo"


def test_anthropic_api_key_alone_selects_anthropic_and_acp_agent_model_names_its_model() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ACP_AGENT_MODEL": "claude-haiku-4-5"}

    config = load_config(None, env)

    assert config.default_choice == "anthropic/claude-haiku-4-5"


def test_with_both_keys_openai_comes_first_and_acp_agent_model_names_its_model() -> None:
    env = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "ACP_AGENT_MODEL": "o3"}

    config = load_config(None, env)

    assert config.default_choice == "openai/o3"
    assert [choice for choice, _, _ in config.model_choices()][1].startswith("anthropic/")


def test_acp_agent_config_selects_a_file_over_the_key_variables(tmp_path: Path) -> None:
    path = write(tmp_path, LOCAL)

    config = load_config(None, {"ACP_AGENT_CONFIG": str(path), "OPENAI_API_KEY": "sk-test"})

    assert config.source == str(path)
    assert config.default_choice == "local/qwen2.5-coder:7b"


def test_acp_agent_config_is_read_from_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, LOCAL)
    monkeypatch.setenv("ACP_AGENT_CONFIG", str(path))

    assert load_config(None).source == str(path)


def test_an_explicit_path_wins_over_acp_agent_config(tmp_path: Path) -> None:
    chosen = write(tmp_path, ECHO, "chosen.toml")
    ignored = write(tmp_path, LOCAL, "ignored.toml")

    config = load_config(str(chosen), {"ACP_AGENT_CONFIG": str(ignored)})

    assert config.source == str(chosen)


def test_acp_agent_config_naming_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"

    with pytest.raises(ConfigError, match="config file not found") as caught:
        load_config(None, {"ACP_AGENT_CONFIG": str(missing)})

    assert str(missing) in str(caught.value)


def test_an_empty_acp_agent_config_falls_back_to_the_environment() -> None:
    assert load_config(None, {"ACP_AGENT_CONFIG": ""}).default_choice == "echo/echo"


# --- the README documents every key --------------------------------------------------------


def _nested_models(annotation: Any, path: str) -> list[tuple[type[BaseModel], str]]:
    """The config models inside a field's type, each with the key path that leads to it."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, path)]
    args = get_args(annotation)
    if get_origin(annotation) is dict:
        return _nested_models(args[1], f"{path}.<name>")
    if get_origin(annotation) in (tuple, list):
        return _nested_models(args[0], f"{path}[]")
    return [found for arg in args for found in _nested_models(arg, path)]  # unions, Annotated


def config_key_paths(model: type[BaseModel] = AgentConfig, prefix: str = "") -> set[str]:
    """Every key a config file may hold, spelled as the README's reference spells it."""
    paths: set[str] = set()
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        path = f"{prefix}{name}"
        paths.add(path)
        for nested, nested_path in _nested_models(info.annotation, path):
            paths |= config_key_paths(nested, f"{nested_path}.")
    return paths


def test_the_readme_config_reference_documents_every_key_and_no_other() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("### Configuration reference", 1)[1].split("\n#", 1)[0]
    documented = {
        line.split("|")[1].strip().strip("`")
        for line in section.splitlines()
        if line.startswith("| `")
    }

    assert documented == config_key_paths()


def test_a_system_prompt_with_an_unknown_placeholder_is_reported_before_anything_starts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('system_prompt = "Work in {cwd} on {project}"\n[providers.e]\ntype = "echo"\n')
    with pytest.raises(ConfigError) as caught:
        load_config_file(path)
    assert str(path) in str(caught.value)
    assert "system_prompt" in str(caught.value) and "project" in str(caught.value)


def test_the_source_of_a_configuration_is_not_a_key_a_file_can_set(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('source = "forged"\n[providers.e]\ntype = "echo"\n')
    with pytest.raises(ConfigError) as caught:
        load_config_file(path)
    assert "source: unknown key" in str(caught.value)


# --- shell_environment_policy --------------------------------------------------------------

BAD_POLICIES = {
    "unknown key": ("inherit_all = true", "shell_environment_policy.inherit_all", "unknown key"),
    "unknown inherit choice": (
        'inherit = "some"',
        "shell_environment_policy.inherit",
        "'all', 'core' or 'none'",
    ),
    "a string for a boolean": (
        'ignore_default_excludes = "yes"',
        "shell_environment_policy.ignore_default_excludes",
        "valid boolean",
    ),
    "one pattern instead of a list": (
        'exclude = "AWS_*"',
        "shell_environment_policy.exclude",
        "valid tuple",
    ),
    "an empty pattern": (
        'include_only = ["PATH", ""]',
        "shell_environment_policy.include_only",
        "not a pattern",
    ),
    "a number as a pattern": (
        "include_only = [3]",
        "shell_environment_policy.include_only.0",
        "valid string",
    ),
    "a number as a value": ("set = { CI = 1 }", "shell_environment_policy.set.CI", "valid string"),
    "a name with =": (
        'set = { "A=B" = "x" }',
        "shell_environment_policy.set",
        "'A=B' is not a variable name",
    ),
}


@pytest.mark.parametrize(
    ("setting", "key_path", "message"), BAD_POLICIES.values(), ids=list(BAD_POLICIES)
)
def test_a_bad_shell_environment_policy_names_its_key(
    tmp_path: Path, setting: str, key_path: str, message: str
) -> None:
    path = write(tmp_path, f"{ECHO}\n[shell_environment_policy]\n{setting}\n")

    with pytest.raises(ConfigError) as caught:
        load_config_file(path)

    problems = str(caught.value).splitlines()[1:]
    assert any(line.strip().startswith(f"{key_path}: ") for line in problems), problems
    assert message in str(caught.value)


def test_without_a_shell_environment_policy_credentials_are_dropped_and_the_rest_inherited(
    tmp_path: Path,
) -> None:
    policy = load_config_file(write(tmp_path, ECHO)).shell_environment_policy

    assert policy.inherit == "all"
    assert policy.ignore_default_excludes is False
    assert (policy.exclude, policy.set, policy.include_only) == ((), {}, ())


def test_the_commented_shell_environment_policy_example_is_valid(tmp_path: Path) -> None:
    text = (CONFIGS / "echo.toml").read_text(encoding="utf-8")
    start = text.index("# [shell_environment_policy]")
    block, rest = text[start:].split("\n\n", 1)
    uncommented = "\n".join(line.removeprefix("# ") for line in block.splitlines())

    config = load_config_file(write(tmp_path, f"{text[:start]}{uncommented}\n\n{rest}"))

    assert config.shell_environment_policy.exclude == ("AWS_*", "*_DSN")
    assert config.shell_environment_policy.set == {"CI": "1"}
