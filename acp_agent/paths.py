"""Which config file acp-agent reads, and where it keeps its state.

`--config`, else `$ACP_AGENT_CONFIG`, else the user's config file if it exists
(`config.toml` in the user's config directory, beside the credentials `acp-agent login`
stores: `$XDG_CONFIG_HOME/acp-agent`, else `~/.config/acp-agent`; what `acp-agent config
init` writes), else none: a configuration derived from the environment.

The state directory holds the sessions (`sessions/`) and the logs of headless runs
(`logs/`). Standard library only: the server resolves the config path before answering
`initialize`, when pydantic and the rest are not loaded yet.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP_NAME = "acp-agent"
CONFIG_ENV_VAR = "ACP_AGENT_CONFIG"
CONFIG_FILE_NAME = "config.toml"


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The user's config file, whether or not it exists."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec ignores relative paths
        return Path(xdg) / APP_NAME / CONFIG_FILE_NAME
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return home / ".config" / APP_NAME / CONFIG_FILE_NAME


def config_path(explicit: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The config file to load: the one named, `$ACP_AGENT_CONFIG`, the user's if it exists."""
    env = os.environ if env is None else env
    if explicit:
        return explicit
    if env.get(CONFIG_ENV_VAR):
        return env[CONFIG_ENV_VAR]
    user = user_config_path(env)
    return str(user) if user.is_file() else None


def default_state_dir(env: Mapping[str, str] | None = None, *, platform: str | None = None) -> Path:
    """Where sessions and run logs live unless the config's `state_dir` says:
    `$XDG_STATE_HOME/acp-agent`, else the platform's user state directory
    (`~/.local/state`, macOS `~/Library/Application Support`, Windows `%LOCALAPPDATA%`)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    xdg = env.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec ignores relative paths
        return Path(xdg) / APP_NAME
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    if platform == "darwin":
        return home / "Library" / "Application Support" / APP_NAME
    if platform == "win32":
        local = env.get("LOCALAPPDATA")
        return (Path(local) if local else home / "AppData" / "Local") / APP_NAME
    return home / ".local" / "state" / APP_NAME


def state_dir(configured: str | None, env: Mapping[str, str] | None = None) -> Path:
    """The state directory in use: the config's `state_dir`, else the default."""
    return Path(configured).expanduser() if configured else default_state_dir(env)
