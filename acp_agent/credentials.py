"""API keys stored by `acp-agent login`: one small file in the user's config directory, or
the OS keyring when the `keyring` package is installed and has a real backend.

    $XDG_CONFIG_HOME/acp-agent/credentials.json     (else ~/.config/acp-agent/: beside the
                                                     config.toml `acp-agent config init` writes)

    {"version": 1, "providers": {"openai": {"api_key": "sk-..."},
                                 "anthropic": {"store": "keyring"}}}

The file is the owner's only (0600, in a 0700 directory) and is replaced atomically
(temporary file in the same directory, fsync, `os.replace`), so a crash never leaves half
a file. A key kept in the keyring leaves only its marker here: the keyring cannot list
what it holds, the file can.

Keys are looked up when asked (`CredentialStore` is a live mapping of provider name to
key), so a login or logout made while the agent runs applies to the next provider created.
A stored key is used only when neither the environment nor the config gives one
(`config.py` decides that); it is a secret like any other: never logged, redacted from
session files (`child_env.agent_secrets`), never in a child's environment (it never is in
ours).

Standard library only at import: the composition root reads this before anything heavy.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import suppress
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from .paths import user_config_path

log = logging.getLogger(__name__)

FILE_NAME: Final = "credentials.json"
FORMAT_VERSION: Final = 1
KEYRING_SERVICE: Final = "acp-agent"
"""The keyring entry of provider P is (service "acp-agent", username P)."""
IN_KEYRING: Final = "keyring"


class CredentialsError(Exception):
    """The credentials file (or the keyring) cannot be read or written; the message names
    the file and says what to do."""


def credentials_path(env: Mapping[str, str] | None = None) -> Path:
    """Beside the user's config file (`paths.user_config_path`)."""
    return user_config_path(env).parent / FILE_NAME


class CredentialStore(Mapping[str, str]):
    """Provider name -> stored API key, read from disk (and the keyring) at each lookup."""

    def __init__(self, path: Path, *, keyring: ModuleType | None = None) -> None:
        self.path = path
        self._keyring = keyring
        """The keyring module to use; None: the installed one, if it has a usable backend."""

    # --- reading ---------------------------------------------------------------------------

    def __getitem__(self, provider: str) -> str:
        entry = self._entries().get(provider)
        key = self._key_of(provider, entry) if entry is not None else None
        if key is None:
            raise KeyError(provider)
        return key

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())

    def get_quietly(self, provider: str) -> str | None:
        """The stored key, or None when there is none or the store cannot be read (logged,
        never raised: a broken file must not stop the agent)."""
        try:
            return self.get(provider)
        except CredentialsError as exc:
            log.warning("stored credentials ignored: %s", exc)
            return None

    def where(self, provider: str) -> str | None:
        """Where the key of `provider` is kept ("file" or "keyring"); None if not stored."""
        entry = self._entries().get(provider)
        if entry is None:
            return None
        return IN_KEYRING if entry.get("store") == IN_KEYRING else "file"

    # --- writing ---------------------------------------------------------------------------

    def save(self, provider: str, key: str, *, use_keyring: bool | None = None) -> str:
        """Store `key` for `provider`, replacing what was there; returns where it went.

        `use_keyring`: None: the keyring if one is usable, else the file."""
        keyring = self._usable_keyring() if use_keyring is not False else None
        if use_keyring and keyring is None:
            raise CredentialsError(
                "no usable OS keyring: install the `keyring` package (with a backend for "
                "your system), or store the key in the file (--store file)"
            )
        entries = self._entries()
        if keyring is not None:
            try:
                keyring.set_password(KEYRING_SERVICE, provider, key)
            except Exception as exc:
                raise CredentialsError(
                    f"the keyring refused the key: {type(exc).__name__} (use --store file)"
                ) from None
            entries[provider] = {"store": IN_KEYRING}
        else:
            entries[provider] = {"api_key": key}
        self._write(entries)
        return IN_KEYRING if keyring is not None else "file"

    def remove(self, provider: str | None = None) -> list[str]:
        """Forget the key of `provider` (None: every key); returns the providers forgotten.

        With every key gone the file is deleted. A file that cannot be read is deleted
        when every key is to go (there is nothing in it to keep)."""
        try:
            entries = self._entries()
        except CredentialsError:
            if provider is not None:
                raise
            self._delete()
            return []
        names = [provider] if provider is not None and provider in entries else []
        if provider is None:
            names = list(entries)
        for name in names:
            if entries.pop(name).get("store") == IN_KEYRING:
                self._forget_in_keyring(name)
        if not names:
            return []
        if entries:
            self._write(entries)
        else:
            self._delete()
        return names

    def _delete(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise CredentialsError(f"{self.path}: cannot remove: {exc}") from None

    # --- the file --------------------------------------------------------------------------

    def _entries(self) -> dict[str, dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise CredentialsError(f"{self.path}: cannot read: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise CredentialsError(self._broken("not valid JSON")) from None
        providers = data.get("providers") if isinstance(data, dict) else None
        if not isinstance(providers, dict):
            raise CredentialsError(self._broken("no providers table"))
        return {
            name: entry
            for name, entry in providers.items()
            if isinstance(name, str) and isinstance(entry, dict)
        }

    def _broken(self, why: str) -> str:
        return f"{self.path}: {why}; remove it (`acp-agent logout`) and log in again"

    def _key_of(self, provider: str, entry: dict[str, Any]) -> str | None:
        if entry.get("store") == IN_KEYRING:
            keyring = self._usable_keyring()
            if keyring is None:
                raise CredentialsError(
                    f"the key of {provider} is in the OS keyring, which cannot be used now "
                    "(is the `keyring` package installed?)"
                )
            try:
                stored = keyring.get_password(KEYRING_SERVICE, provider)
            except Exception as exc:
                raise CredentialsError(
                    f"the keyring could not give the key of {provider}: {type(exc).__name__}"
                ) from None
            return stored if isinstance(stored, str) and stored else None
        key = entry.get("api_key")
        return key if isinstance(key, str) and key else None

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        """The whole file, replaced atomically: owner-only, in an owner-only directory."""
        directory = self.path.parent
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.name == "posix":
                os.chmod(directory, 0o700)
            text = json.dumps({"version": FORMAT_VERSION, "providers": entries}, indent=2)
            # mkstemp creates the file 0600, so the key is never readable by others.
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{FILE_NAME}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    file.write(text + "\n")
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp)
                raise
            _sync_directory(directory)
        except OSError as exc:
            raise CredentialsError(f"{self.path}: cannot write: {exc}") from None

    # --- the keyring -----------------------------------------------------------------------

    def _usable_keyring(self) -> ModuleType | None:
        if self._keyring is not None:
            return self._keyring
        return installed_keyring()

    def _forget_in_keyring(self, provider: str) -> None:
        keyring = self._usable_keyring()
        if keyring is None:
            log.warning("the keyring entry of %s could not be removed: no usable keyring", provider)
            return
        try:
            keyring.delete_password(KEYRING_SERVICE, provider)
        except Exception as exc:  # already gone, or the backend failed: the marker goes anyway
            log.info("keyring entry of %s not removed: %s", provider, type(exc).__name__)


def stored_keys(env: Mapping[str, str] | None = None) -> StoredKeys:
    """The keys `acp-agent login` stored, as every command reads them (`load_config`)."""
    return StoredKeys(CredentialStore(credentials_path(env)))


class StoredKeys(Mapping[str, str]):
    """The agent's view of a `CredentialStore`: a store that cannot be read counts as empty
    (logged once per lookup), so a broken file never stops the agent from starting."""

    def __init__(self, store: CredentialStore) -> None:
        self._store = store

    def __getitem__(self, provider: str) -> str:
        key = self._store.get_quietly(provider)
        if key is None:
            raise KeyError(provider)
        return key

    def __iter__(self) -> Iterator[str]:
        try:
            return iter(list(self._store))
        except CredentialsError as exc:
            log.warning("stored credentials ignored: %s", exc)
            return iter(())

    def __len__(self) -> int:
        return sum(1 for _ in self)


def installed_keyring() -> ModuleType | None:
    """The `keyring` module when it is installed and its backend stores for real (not the
    fail / null backends it falls back to on a headless machine)."""
    try:
        import keyring  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
        priority = float(getattr(backend, "priority", 0))
    except Exception:
        return None
    module = type(backend).__module__
    if priority <= 0 or module.startswith(("keyring.backends.fail", "keyring.backends.null")):
        return None
    found: ModuleType = keyring
    return found


def _sync_directory(directory: Path) -> None:
    """fsync the directory, so the rename survives a power loss (POSIX only)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = [
    "CredentialStore",
    "CredentialsError",
    "StoredKeys",
    "credentials_path",
    "installed_keyring",
    "stored_keys",
]
