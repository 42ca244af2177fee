"""The one function that builds a child process's environment (architecture rule 9).

Commands the model runs must not carry our credentials back into the conversation (`env`,
a script that prints its environment, a build log). So every child we start takes its
environment from `child_environment`:

- the agent's local shell, for clients without terminals: the agent computes it per turn
  into `ToolContext.child_env`, and `tools.local.run_local_command` starts from it;
- the terminals of the headless runner (`acp-agent run`, `runner/_local.py`): the runner
  loads the same config and hands the result to its `Terminals`;
- MCP stdio servers: start from
  `child_environment(env, config, policy=ShellEnvironmentPolicy(inherit="core"))` (a small
  allowlist, as the style guide asks) and put the server's configured `env` on top; that is
  where a user gives a server its own token.

Editor terminals (`terminal/create` through the client) are started by the editor, with the
editor's environment, not ours: we send only additions (`PAGER=cat` ...), and nothing here
can or needs to clean what the editor passes.

The rules, in codex's order (`shell_environment_policy`):

1. inherit: `all` of `env`, the `core` few every program expects (`CORE_VARIABLES`), or
   `none`;
2. our own key variables are dropped, whatever the policy says: the variables the
   configured providers read their keys from (`api_key_env`), the vendors' defaults
   (`BUILTIN_KEY_VARIABLES`) and the cloud credentials of configured Bedrock / Vertex
   providers;
3. unless `ignore_default_excludes`: every name containing KEY, SECRET, TOKEN, PASSWORD or
   CREDENTIAL, in any case (`OPENROUTER_KEY`, `GITHUB_TOKEN`, `db_password` ...);
4. `exclude`: names matching any of these glob patterns (case-insensitive);
5. `set`: fixed values, added or replacing. A value written there comes from the config
   file, not from our environment, so it passes even under a key variable's name: the
   user's explicit choice;
6. `include_only`, if not empty: only names matching one of these patterns stay (set ones
   included).

Names are compared case-insensitively throughout, so `openai_api_key` counts as ours too.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from .config import AgentConfig, EchoProviderConfig, ShellEnvironmentPolicy

DEFAULT_POLICY = ShellEnvironmentPolicy()

CORE_VARIABLES = frozenset(
    {
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "USER",
        "USERNAME",
        "TMPDIR",
        "TEMP",
        "TMP",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
    }
)
"""`inherit = "core"`: codex's set, plus the locale, so output decodes as it should."""

SECRET_NAME_PARTS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")
"""The default excludes: a name containing one of these (in any case) looks like a secret."""

BUILTIN_KEY_VARIABLES = frozenset(
    {
        "OPENAI_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_AD_TOKEN",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
    }
)
"""Keys we (or the vendor SDKs we call) read when the config names no variable."""

CLOUD_KEY_VARIABLES: Mapping[str, frozenset[str]] = {
    "anthropic-bedrock": frozenset(
        {
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_BEARER_TOKEN_BEDROCK",
        }
    ),
    "anthropic-vertex": frozenset({"GOOGLE_APPLICATION_CREDENTIALS"}),
}
"""Credentials the cloud SDKs read, ours only when a provider of that type is configured."""


def agent_key_variables(config: AgentConfig | None) -> frozenset[str]:
    """The variables our own credentials live in: never passed on from our environment."""
    names = set(BUILTIN_KEY_VARIABLES)
    for provider in config.providers.values() if config is not None else ():
        if isinstance(provider, EchoProviderConfig):
            continue
        names |= CLOUD_KEY_VARIABLES.get(provider.type, frozenset())
        if provider.api_key_env:
            names.add(provider.api_key_env)
    return frozenset(names)


def agent_secrets(config: AgentConfig, env: Mapping[str, str]) -> list[str]:
    """The values of our own credentials: from the key variables, the config itself and
    the keys `acp-agent login` stored (which live in no variable, so no child gets them)."""
    values = [env[name] for name in agent_key_variables(config) if env.get(name)]
    for provider in config.providers.values():
        if isinstance(provider, EchoProviderConfig):
            continue
        if provider.api_key:
            values.append(provider.api_key)
        if stored := provider.stored_key():
            values.append(stored)
    return values


def child_environment(
    env: Mapping[str, str],
    config: AgentConfig | None = None,
    *,
    policy: ShellEnvironmentPolicy | None = None,
) -> dict[str, str]:
    """The environment for a child started from ours (`env`, usually `os.environ`).

    `policy` defaults to the config's `shell_environment_policy`; the key variables come
    from the config (without one, only the built-in ones). Returns a new dict: callers add
    their own variables (`PAGER` ...) on top.
    """
    if policy is None:
        policy = config.shell_environment_policy if config is not None else DEFAULT_POLICY
    ours = {name.upper() for name in agent_key_variables(config)}
    child = {
        name: value
        for name, value in _inherited(env, policy.inherit).items()
        if name.upper() not in ours
        and (policy.ignore_default_excludes or not _looks_secret(name))
        and not _matches_any(name, policy.exclude)
    }
    child.update(policy.set)
    if policy.include_only:
        child = {
            name: value for name, value in child.items() if _matches_any(name, policy.include_only)
        }
    return child


def _inherited(env: Mapping[str, str], inherit: str) -> dict[str, str]:
    if inherit == "all":
        return dict(env)
    if inherit == "core":
        return {name: value for name, value in env.items() if name in CORE_VARIABLES}
    return {}


def _looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def _matches_any(name: str, patterns: Iterable[str]) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern.upper()) for pattern in patterns)


__all__ = [
    "BUILTIN_KEY_VARIABLES",
    "CORE_VARIABLES",
    "agent_key_variables",
    "child_environment",
]
