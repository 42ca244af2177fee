"""`child_environment`: what a child process may see of ours (architecture rule 9).

Every row plants credentials next to harmless variables and checks which survive.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_agent.child_env import BUILTIN_KEY_VARIABLES, agent_key_variables, child_environment
from acp_agent.config import AgentConfig, ShellEnvironmentPolicy

HARMLESS = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/dev",
    "LANG": "C.UTF-8",
    "JAVA_HOME": "/opt/jdk",
    "VIRTUAL_ENV": "/work/.venv",
    "LOGNAME": "dev",
    "EDITOR": "vim",
}
CREDENTIALS = {
    "OPENAI_API_KEY": "sk-openai",
    "ANTHROPIC_API_KEY": "sk-ant",
    "AZURE_OPENAI_API_KEY": "azure-key",
    "OPENROUTER_KEY": "sk-or",
    "GITHUB_TOKEN": "ghp_token",
    "db_password": "hunter2",
    "MY_PASSWORD_FILE": "/run/secrets/pw",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "AWS_SESSION_TOKEN": "aws-session",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/dev/sa.json",
}
OURS = {"MY_LLM": "llm-secret"}
"""A provider's api_key_env without KEY or TOKEN in its name: only the config says it is ours."""
ENV = {**HARMLESS, **CREDENTIALS, **OURS}


def config_with_key_variable(name: str = "MY_LLM", **policy: Any) -> AgentConfig:
    return AgentConfig.model_validate(
        {
            "providers": {
                "echo": {"type": "echo"},
                "llm": {
                    "type": "openai-compatible",
                    "base_url": "http://localhost:1/v1",
                    "api_key_env": name,
                    "models": [{"id": "m"}],
                },
            },
            "shell_environment_policy": policy,
        }
    )


def test_by_default_credentials_are_dropped_and_everything_else_is_kept() -> None:
    child = child_environment(ENV, config_with_key_variable())

    assert child == HARMLESS


def test_without_a_config_the_built_in_key_variables_and_credential_names_are_dropped() -> None:
    child = child_environment({**HARMLESS, **CREDENTIALS})

    assert child == HARMLESS


def test_a_key_variable_without_key_in_its_name_is_dropped_because_the_config_names_it() -> None:
    assert "MY_LLM" in child_environment(ENV, policy=ShellEnvironmentPolicy())
    assert "MY_LLM" not in child_environment(ENV, config_with_key_variable())


@pytest.mark.parametrize(
    "name", ["OPENROUTER_KEY", "GITHUB_TOKEN", "db_password", "Some_Secret", "X_CREDENTIALS"]
)
def test_the_default_excludes_match_anywhere_in_the_name_in_any_case(name: str) -> None:
    assert child_environment({name: "v", "PATH": "/bin"}) == {"PATH": "/bin"}


def test_the_result_is_a_new_dict_and_the_source_is_untouched() -> None:
    source = dict(ENV)
    child = child_environment(source)
    child["NEW"] = "1"

    assert source == ENV


# --- the policy, option by option ----------------------------------------------------------

POLICY_ROWS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "inherit all (the default)": ({"inherit": "all"}, HARMLESS),
    "inherit core: the few variables every program expects": (
        {"inherit": "core"},
        {k: HARMLESS[k] for k in ("PATH", "HOME", "LANG", "LOGNAME")},
    ),
    "inherit none": ({"inherit": "none"}, {}),
    "ignore_default_excludes passes other credentials, never ours": (
        {"ignore_default_excludes": True},
        {
            **HARMLESS,
            **{
                k: v
                for k, v in CREDENTIALS.items()
                if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY")
            },
        },
    ),
    "exclude globs, case-insensitive": (
        {"exclude": ["*_home", "EDITOR"]},
        {k: v for k, v in HARMLESS.items() if k not in ("JAVA_HOME", "EDITOR")},
    ),
    "set adds and replaces fixed values": (
        {"set": {"EDITOR": "true", "CI": "1"}},
        {**HARMLESS, "EDITOR": "true", "CI": "1"},
    ),
    "include_only globs keep only what matches": (
        {"include_only": ["PATH", "lang"]},
        {"PATH": HARMLESS["PATH"], "LANG": HARMLESS["LANG"]},
    ),
    "include_only also filters set": (
        {"include_only": ["PATH", "CI"], "set": {"CI": "1", "OTHER": "x"}},
        {"PATH": HARMLESS["PATH"], "CI": "1"},
    ),
    "inherit none with set: exactly the fixed values": (
        {"inherit": "none", "set": {"PATH": "/bin"}},
        {"PATH": "/bin"},
    ),
    "exclude runs before set: a set value survives its own exclusion": (
        {"exclude": ["EDITOR"], "set": {"EDITOR": "nano"}},
        {**HARMLESS, "EDITOR": "nano"},
    ),
}


@pytest.mark.parametrize(("policy", "expected"), POLICY_ROWS.values(), ids=list(POLICY_ROWS))
def test_each_policy_option_shapes_the_environment(
    policy: dict[str, Any], expected: dict[str, str]
) -> None:
    assert child_environment(ENV, config_with_key_variable(**policy)) == expected


# --- our own keys, whatever the policy says ------------------------------------------------

GENEROUS_POLICIES = {
    "inherit all, no default excludes": {"inherit": "all", "ignore_default_excludes": True},
    "include_only naming them": {
        "ignore_default_excludes": True,
        "include_only": ["*"],
    },
    "inherit core, no default excludes, include_only naming them": {
        "inherit": "core",
        "ignore_default_excludes": True,
        "include_only": ["OPENAI_API_KEY", "MY_LLM", "PATH"],
    },
}


@pytest.mark.parametrize("policy", GENEROUS_POLICIES.values(), ids=list(GENEROUS_POLICIES))
def test_our_key_variables_never_pass_from_our_environment(policy: dict[str, Any]) -> None:
    child = child_environment(ENV, config_with_key_variable(**policy))

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "MY_LLM"):
        assert name not in child
    assert not set(child.values()) & {"sk-openai", "sk-ant", "azure-key", "llm-secret"}


def test_our_key_variables_are_matched_in_any_case() -> None:
    child = child_environment(
        {"openai_api_key": "sk", "my_llm": "s", "PATH": "/bin"},
        config_with_key_variable(ignore_default_excludes=True),
    )

    assert child == {"PATH": "/bin"}


def test_a_value_the_user_writes_in_set_passes_even_under_a_key_variable_name() -> None:
    child = child_environment(
        ENV,
        config_with_key_variable(inherit="none", set={"OPENAI_API_KEY": "sk-for-the-tests"}),
    )

    assert child == {"OPENAI_API_KEY": "sk-for-the-tests"}


def test_the_key_variables_are_the_built_in_ones_plus_every_configured_api_key_env() -> None:
    config = AgentConfig.model_validate(
        {
            "providers": {
                "a": {"type": "anthropic", "api_key_env": "ANT_KEY_1", "models": [{"id": "m"}]},
                "o": {"type": "openai", "api_key_env": "LLM", "models": [{"id": "m"}]},
                "e": {"type": "echo"},
            }
        }
    )

    names = agent_key_variables(config)

    assert names >= BUILTIN_KEY_VARIABLES | {"ANT_KEY_1", "LLM"}
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY"} <= names


def test_cloud_providers_add_the_cloud_credentials_they_read() -> None:
    config = AgentConfig.model_validate(
        {
            "providers": {
                "b": {"type": "anthropic-bedrock", "region": "us-east-1", "models": [{"id": "m"}]},
                "v": {"type": "anthropic-vertex", "models": [{"id": "m"}]},
            },
            "shell_environment_policy": {"ignore_default_excludes": True},
        }
    )

    child = child_environment({**ENV, "AWS_ACCESS_KEY_ID": "AKIA", "AWS_PROFILE": "dev"}, config)

    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ):
        assert name not in child
    assert child["AWS_PROFILE"] == "dev"
    assert child["GITHUB_TOKEN"] == "ghp_token"  # not ours: the user let it through
