"""Every configuration error says what to write instead: unknown provider types list the
valid ones, a misspelt key names the nearest valid key, a model list written as a table
says so, and a key pasted into `api_key_env` is refused without being repeated. And a
local server named by `OPENAI_BASE_URL` needs no key."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_agent.config import ConfigError, OpenAIProviderConfig, load_config

KEY = "sk-proj-Zx8Qv3Lm9Tt2Rr7Pp4Kk1Jj6Hh5Gg0Ff3Dd2Ss1Aa"


def config_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(str(path), {})
    return str(caught.value)


def test_an_unknown_provider_type_lists_the_valid_ones_and_the_nearest(tmp_path: Path) -> None:
    message = config_error(
        tmp_path,
        '[providers.x]\ntype = "openai-compat"\nbase_url = "http://localhost:11434/v1"\n'
        '[[providers.x.models]]\nid = "llama3"\n',
    )

    assert message.splitlines()[1] == (
        "  providers.x: unknown provider type 'openai-compat'; did you mean "
        "'openai-compatible'? the valid types are echo, openai, openai-compatible, "
        "azure-openai, anthropic, anthropic-bedrock, anthropic-vertex"
    )


def test_a_provider_without_a_type_lists_the_valid_ones(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[providers.x]\n[[providers.x.models]]\nid = "m"\n')

    assert "providers.x: type: missing; the valid types are echo, openai," in message


@pytest.mark.parametrize(
    ("toml", "line"),
    [
        pytest.param(
            'default_modle = "e/echo"\n[providers.e]\ntype = "echo"\n',
            "default_modle: unknown key; did you mean 'default_model'?",
            id="top level",
        ),
        pytest.param(
            '[providers.x]\ntype = "openai"\napi_key_evn = "X"\nmodels = [{id = "m"}]\n',
            "providers.x.api_key_evn: unknown key; did you mean 'api_key_env'?",
            id="provider",
        ),
        pytest.param(
            '[providers.x]\ntype = "anthropic"\n[[providers.x.models]]\nid = "m"\n'
            "context_windows = 8000\n",
            "providers.x.models.0.context_windows: unknown key; did you mean 'context_window'?",
            id="model",
        ),
        pytest.param(
            '[providers.x]\ntype = "openai"\n[[providers.x.models]]\nid = "m"\n'
            "prices = { inptu = 1.0, output = 2.0 }\n",
            "providers.x.models.0.prices.inptu: unknown key; did you mean 'input'?",
            id="prices",
        ),
        pytest.param(
            '[providers.e]\ntype = "echo"\nchunk_dealy = 0.1\n',
            "providers.e.chunk_dealy: unknown key; did you mean 'chunk_delay'?",
            id="echo provider",
        ),
        pytest.param(
            '[providers.e]\ntype = "echo"\n[mcp_servers.files]\ncomand = "server"\n',
            "mcp_servers.files.comand: unknown key; did you mean 'command'?",
            id="mcp server",
        ),
    ],
)
def test_a_misspelt_key_suggests_the_nearest_valid_key(
    tmp_path: Path, toml: str, line: str
) -> None:
    assert f"  {line}" in config_error(tmp_path, toml).splitlines()


def test_an_unknown_key_like_no_valid_one_is_just_unknown(tmp_path: Path) -> None:
    message = config_error(tmp_path, 'colour = "blue"\n[providers.e]\ntype = "echo"\n')

    assert "  colour: unknown key" in message.splitlines()


def test_models_written_as_a_table_says_to_double_the_brackets(tmp_path: Path) -> None:
    message = config_error(
        tmp_path,
        '[providers.x]\ntype = "openai-compatible"\nbase_url = "http://localhost:11434/v1"\n'
        '[providers.x.models]\nid = "llama3"\n',
    )

    assert message.splitlines()[1] == (
        "  providers.x.models: written as a table ([providers.x.models]); a model list is an "
        "array of tables: write [[providers.x.models]] (double brackets) above each model's "
        "id, name, context_window ..."
    )


@pytest.mark.parametrize("provider_type", ["openai", "anthropic"])
@pytest.mark.parametrize(
    "value",
    [
        KEY,
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "AKIAIOSFODNN7EXAMPLE",
        "Zx8Qv3Lm9Tt2Rr7Pp4Kk1Jj6Hh5Gg0Ff3D",
    ],
)
def test_an_api_key_env_that_looks_like_a_key_is_an_error_that_never_shows_it(
    tmp_path: Path, provider_type: str, value: str
) -> None:
    message = config_error(
        tmp_path,
        f'[providers.x]\ntype = "{provider_type}"\napi_key_env = "{value}"\n'
        'models = [{id = "m"}]\n',
    )

    assert "providers.x.api_key_env: this looks like an API key itself" in message
    assert value not in message
    assert value[:8] not in message


def test_an_api_key_env_that_is_no_variable_name_says_what_one_is(tmp_path: Path) -> None:
    message = config_error(
        tmp_path, '[providers.x]\ntype = "openai"\napi_key_env = "MY KEY"\nmodels = [{id = "m"}]\n'
    )

    assert "providers.x.api_key_env: not the name of an environment variable" in message


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "work_key", "MY_COMPANY_LLM_GATEWAY_TOKEN_2"])
def test_ordinary_variable_names_are_accepted(tmp_path: Path, name: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        f'[providers.x]\ntype = "openai"\napi_key_env = "{name}"\nmodels = [{{id = "m"}}]\n'
    )

    provider = load_config(str(path), {}).providers["x"]

    assert isinstance(provider, OpenAIProviderConfig)
    assert provider.api_key_env == name


# --- local servers from the environment ----------------------------------------------------


@pytest.mark.parametrize(
    "url", ["http://localhost:11434/v1", "http://127.0.0.1:1234/v1", "http://192.168.1.5:8000/v1"]
)
def test_a_local_openai_base_url_needs_no_key_and_says_a_placeholder_is_sent(url: str) -> None:
    config = load_config(None, {"OPENAI_BASE_URL": url, "ACP_AGENT_MODEL": "llama3.2"})

    assert config.default_choice == "openai/llama3.2"
    provider = config.providers["openai"]
    assert isinstance(provider, OpenAIProviderConfig)
    assert provider.base_url == url
    assert config.source == (
        f"environment (OPENAI_BASE_URL={url}, a local server: no key needed, a placeholder is sent)"
    )


def test_a_public_openai_base_url_without_a_key_still_means_echo() -> None:
    config = load_config(None, {"OPENAI_BASE_URL": "https://llm.example.com/v1"})

    assert config.default_choice == "echo/echo"


def test_a_title_model_must_be_a_configured_model(tmp_path: Path) -> None:
    message = config_error(tmp_path, 'title_model = "e/nope"\n[providers.e]\ntype = "echo"\n')

    assert "title_model: unknown model 'e/nope'; configured: e/echo" in message
