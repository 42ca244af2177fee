"""Whether each configured provider has what it needs to call its API.

Reported, never printed: the key itself stays where it is. A provider's key comes from the
config file (`api_key`), else the variable it names (`api_key_env`) or its type's default
variable, else a key stored by `acp-agent login`. Local servers and the offline echo
provider need none; Bedrock and Vertex use the cloud's own credentials, which are only
looked for (an instance role or metadata server cannot be seen from here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..config import (
    AnthropicProviderConfig,
    EchoProviderConfig,
    ProviderConfig,
)
from ..credentials import CredentialsError, CredentialStore, credentials_path
from ..local_addresses import is_local_url
from ._common import DEFAULT_KEY_VARIABLES

KeyState = Literal["present", "missing", "not needed", "unknown"]


@dataclass(frozen=True, slots=True)
class KeyStatus:
    state: KeyState
    detail: str
    """Where the key is, or what is missing: "OPENAI_API_KEY is set"."""
    variable: str | None = None
    """The variable to set when the key is missing."""

    @property
    def usable(self) -> bool:
        return self.state != "missing"


def key_status(name: str, provider: ProviderConfig, env: Mapping[str, str]) -> KeyStatus:
    if isinstance(provider, EchoProviderConfig):
        return KeyStatus("not needed", "none needed (offline)")
    # Read by name: provider types added later (plugins) may lack these keys.
    api_key = getattr(provider, "api_key", None)
    api_key_env = getattr(provider, "api_key_env", None)
    if api_key:
        return KeyStatus("present", "api_key in the config file")
    if isinstance(provider, AnthropicProviderConfig) and provider.type != "anthropic":
        return _cloud_status(name, provider, env)
    if provider.type == "openai-compatible" and not api_key_env:
        return KeyStatus("not needed", "none configured (local servers need none)")
    variable = api_key_env or DEFAULT_KEY_VARIABLES.get(provider.type)
    if not isinstance(variable, str):
        return KeyStatus("unknown", f"a {provider.type} provider: its key is not checked here")
    status = _variable_status(name, variable, env)
    base_url = getattr(provider, "base_url", None)
    if status.state == "missing" and provider.type == "openai" and is_local_url(base_url):
        # As the provider does: a local server gets a placeholder key.
        return KeyStatus("not needed", f"none needed: {base_url} is a local server", variable)
    return status


def _variable_status(name: str, variable: str, env: Mapping[str, str]) -> KeyStatus:
    if env.get(variable):
        return KeyStatus("present", f"{variable} is set", variable)
    stored = _stored(name, env)
    if stored is not None:
        return KeyStatus("present", f"stored by acp-agent login ({stored})", variable)
    return KeyStatus(
        "missing", f"{variable} is not set (set it, or run: acp-agent login {name})", variable
    )


def _stored(name: str, env: Mapping[str, str]) -> str | None:
    """Where `acp-agent login` keeps this provider's key ("file", "keyring"), if it does."""
    try:
        return CredentialStore(credentials_path(env)).where(name)
    except CredentialsError:
        return None


def _cloud_status(
    name: str, provider: AnthropicProviderConfig, env: Mapping[str, str]
) -> KeyStatus:
    if provider.api_key_env:
        return _variable_status(name, provider.api_key_env, env)
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    if provider.type == "anthropic-bedrock":
        for variable in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_BEARER_TOKEN_BEDROCK"):
            if env.get(variable):
                return KeyStatus("present", f"AWS credentials: {variable} is set")
        if (home / ".aws" / "credentials").is_file():
            return KeyStatus("present", "AWS credentials: ~/.aws/credentials")
        return KeyStatus(
            "unknown",
            "no AWS credentials found (AWS_PROFILE, AWS_ACCESS_KEY_ID, ~/.aws); an instance "
            "role would do",
        )
    if env.get("GOOGLE_APPLICATION_CREDENTIALS"):
        return KeyStatus("present", "Google credentials: GOOGLE_APPLICATION_CREDENTIALS is set")
    config_dir = Path(env["CLOUDSDK_CONFIG"]) if env.get("CLOUDSDK_CONFIG") else None
    config_dir = config_dir or home / ".config" / "gcloud"
    if (config_dir / "application_default_credentials.json").is_file():
        return KeyStatus("present", "Google credentials: application default credentials")
    return KeyStatus(
        "unknown",
        "no Google credentials found (run: gcloud auth application-default login); a "
        "metadata server would do",
    )
