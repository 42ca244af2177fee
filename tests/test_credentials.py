"""Stored keys: the credentials file (owner-only, replaced atomically), the optional keyring,
and how a stored key takes its place after the config and the environment."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from acp_agent.child_env import agent_secrets, child_environment
from acp_agent.config import config_from_env, load_config
from acp_agent.credentials import (
    CredentialsError,
    CredentialStore,
    StoredKeys,
    credentials_path,
    installed_keyring,
)

KEY = "sk-stored-0123456789abcdef"
posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


@pytest.fixture
def store(tmp_path: Path) -> CredentialStore:
    return CredentialStore(tmp_path / "config" / "acp-agent" / "credentials.json")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


class FakeKeyring(ModuleType):
    """Stands in for the `keyring` package."""

    def __init__(self) -> None:
        super().__init__("keyring")
        self.entries: dict[tuple[str, str], str] = {}

    def set_password(self, service: str, user: str, secret: str) -> None:
        self.entries[service, user] = secret

    def get_password(self, service: str, user: str) -> str | None:
        return self.entries.get((service, user))

    def delete_password(self, service: str, user: str) -> None:
        del self.entries[service, user]


# --- the file --------------------------------------------------------------------------------


def test_the_file_lives_beside_the_user_config(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert credentials_path(env) == tmp_path / "xdg" / "acp-agent" / "credentials.json"
    env = {"HOME": str(tmp_path / "home")}
    assert credentials_path(env) == tmp_path / "home" / ".config" / "acp-agent" / "credentials.json"


def test_a_saved_key_reads_back_and_the_file_says_no_more(store: CredentialStore) -> None:
    assert store.save("openai", KEY, use_keyring=False) == "file"
    assert store["openai"] == KEY
    assert dict(store) == {"openai": KEY}
    assert store.where("openai") == "file"
    data = json.loads(store.path.read_text())
    assert data == {"version": 1, "providers": {"openai": {"api_key": KEY}}}


@posix_only
def test_the_file_is_the_owners_only_in_an_owner_only_directory(store: CredentialStore) -> None:
    store.path.parent.mkdir(parents=True, mode=0o755)
    os.chmod(store.path.parent, 0o755)
    store.save("openai", KEY, use_keyring=False)
    assert mode(store.path) == 0o600
    assert mode(store.path.parent) == 0o700


def test_saving_keeps_the_other_providers_and_replaces_the_same_one(
    store: CredentialStore,
) -> None:
    store.save("openai", "sk-first-0000000000", use_keyring=False)
    store.save("anthropic", "sk-ant-1111111111", use_keyring=False)
    store.save("openai", KEY, use_keyring=False)
    assert dict(store) == {"openai": KEY, "anthropic": "sk-ant-1111111111"}


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_file(
    store: CredentialStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save("openai", KEY, use_keyring=False)
    before = store.path.read_bytes()

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(CredentialsError, match="cannot write"):
        store.save("anthropic", "sk-ant-1111111111", use_keyring=False)
    assert store.path.read_bytes() == before
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["credentials.json"]


def test_remove_one_then_all_deletes_the_file(store: CredentialStore) -> None:
    store.save("openai", KEY, use_keyring=False)
    store.save("anthropic", "sk-ant-1111111111", use_keyring=False)
    assert store.remove("openai") == ["openai"]
    assert dict(store) == {"anthropic": "sk-ant-1111111111"}
    assert store.remove("openai") == []
    assert store.remove() == ["anthropic"]
    assert not store.path.exists()
    assert store.remove() == []


def test_a_broken_file_is_a_clear_error_and_logout_removes_it(store: CredentialStore) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_text("{not json")
    with pytest.raises(CredentialsError, match=r"credentials.json: not valid JSON.*logout"):
        store.get("openai")
    assert StoredKeys(store).get("openai") is None  # the agent reads it as empty
    assert list(StoredKeys(store)) == []
    assert store.remove() == []
    assert not store.path.exists()


# --- the keyring -----------------------------------------------------------------------------


def test_with_a_keyring_the_file_holds_only_a_marker(store: CredentialStore) -> None:
    keyring = FakeKeyring()
    store = CredentialStore(store.path, keyring=keyring)
    assert store.save("openai", KEY) == "keyring"
    assert keyring.entries == {("acp-agent", "openai"): KEY}
    assert KEY not in store.path.read_text()
    assert store["openai"] == KEY
    assert store.where("openai") == "keyring"
    assert store.remove() == ["openai"]
    assert keyring.entries == {}


def test_asking_for_the_keyring_without_one_is_an_error(store: CredentialStore) -> None:
    with pytest.raises(CredentialsError, match="keyring"):
        store.save("openai", KEY, use_keyring=True)
    assert not store.path.exists()


def test_an_installed_keyring_with_only_the_fail_backend_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fail_backend = type("Keyring", (), {"priority": 0, "__module__": "keyring.backends.fail"})
    module = ModuleType("keyring")
    module.get_keyring = lambda: fail_backend()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "keyring", module)
    assert installed_keyring() is None
    real_backend = type("Keyring", (), {"priority": 5, "__module__": "keyring.backends.macOS"})
    module.get_keyring = lambda: real_backend()  # type: ignore[attr-defined]
    assert installed_keyring() is module


# --- in the configuration --------------------------------------------------------------------


def test_without_a_config_a_stored_key_brings_its_provider() -> None:
    config = config_from_env({}, {"openai": KEY})
    assert list(config.providers) == ["openai"]
    assert config.providers["openai"].stored_key() == KEY  # type: ignore[union-attr]
    assert "acp-agent login" in config.source
    assert list(config_from_env({}, {}).providers) == ["echo"]


def test_the_environment_and_the_config_win_over_a_stored_key(tmp_path: Path) -> None:
    config = config_from_env({"OPENAI_API_KEY": "sk-env-0000000000"}, {"openai": KEY})
    provider: Any = config.providers["openai"]
    assert provider.resolve_api_key({"OPENAI_API_KEY": "sk-env-0000000000"}) == "sk-env-0000000000"
    assert provider.stored_key() == KEY  # only the last resort (see the providers' tests)
    path = tmp_path / "config.toml"
    path.write_text(
        '[providers.work]\ntype = "openai"\napi_key = "sk-inline-00000000"\n'
        '[[providers.work.models]]\nid = "m"\n'
    )
    work: Any = load_config(str(path), {}, {"work": KEY}).providers["work"]
    assert work.resolve_api_key({}) == "sk-inline-00000000"
    assert work.stored_key() == KEY


def test_stored_keys_are_read_when_asked(store: CredentialStore) -> None:
    config = load_config(None, {}, StoredKeys(store))
    assert list(config.providers) == ["echo"]
    path = store.path
    store.save("openai", KEY, use_keyring=False)
    config = load_config(None, {}, StoredKeys(CredentialStore(path)))
    provider: Any = config.providers["openai"]
    assert provider.stored_key() == KEY
    CredentialStore(path).remove()
    assert provider.stored_key() is None  # a logout applies at once


def test_stored_keys_are_secrets_and_never_reach_a_child() -> None:
    config = config_from_env({}, {"openai": KEY})
    assert KEY in agent_secrets(config, {})
    assert KEY not in child_environment({"PATH": "/bin"}, config).values()


def test_a_stored_key_never_shows_in_the_configs_repr() -> None:
    config = config_from_env({}, {"openai": KEY})
    assert KEY not in repr(config)
    assert KEY not in str(SimpleNamespace(config=config))
