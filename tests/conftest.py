"""Test-wide isolation: no API keys, no user config, asyncio only."""

from __future__ import annotations

# The vendor SDKs use httpx2; respx patches whatever `httpx` is, so alias it before anything
# imports `httpx` (respx included).
import httpx2

httpx2.alias_httpx()

import pytest  # noqa: E402

ISOLATED_ENV_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ACP_AGENT_CONFIG",
    "ACP_AGENT_MODEL",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for name in ISOLATED_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
