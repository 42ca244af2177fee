"""Provider types added by separately installed packages.

A package adds a provider type by declaring an entry point in the group
`acp_agent.providers`; the entry point's name is the type (`type = "<name>"` in the config)
and its object is the plugin: anything with

- `create(name, config, env) -> Provider`: the provider for `[providers.<name>]`, as
  `acp_agent.providers.create_provider` makes the built-in ones (it wraps the result in the
  same retries);
- optionally `config_model`: a subclass of `acp_agent.config.PluginProviderConfig` with the
  plugin's own settings (described pydantic fields; unknown keys are errors as everywhere);
  `config.py`, which validates the plugin's section with it, checks that it is one.

`ProviderPlugin` below is one such object; a module with a `create` function is another.
A plugin is imported only when a configuration names its type. One that fails to import
(or lacks `create`) is reported: the configuration still loads, its providers' models say
why they cannot be used, and every other provider works (see CONTRIBUTING.md).

Lives on the ground floor with `config.py`, which imports it: config needs a plugin's
`config_model` to validate its section. It imports nothing of ours (config's and the
providers' types for annotations only), so no import circle runs through it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from .config import PluginProviderConfig
    from .providers.base import Provider

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "acp_agent.providers"


@dataclass(frozen=True, slots=True)
class ProviderPlugin:
    """What a plugin's entry point may name: how to make its provider, and its settings."""

    create: Callable[[str, Any, Mapping[str, str]], Provider]
    """`create(name, config, env)`: `config` is an instance of `config_model`."""
    config_model: type[PluginProviderConfig] | None = None
    """The plugin's settings; None: only what every provider has (`PluginProviderConfig`)."""


@dataclass(frozen=True, slots=True)
class InstalledPlugin:
    """A provider type some installed package offers (not imported to list it)."""

    type: str
    value: str
    """The entry point's object reference, `module:attribute`."""
    distribution: str | None
    """The package that declares it, with its version."""

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    @property
    def origin(self) -> str:
        """The object and its package, as error messages name a plugin."""
        return f"{self.value} (from {self.distribution or 'an unknown package'})"


class PluginError(Exception):
    """A plugin that cannot be used; the message says which package and why."""


_lock = threading.Lock()
_loaded: dict[str, ProviderPlugin | PluginError] = {}


def installed() -> dict[str, InstalledPlugin]:
    """Every provider type installed packages declare, by type; nothing is imported."""
    from importlib.metadata import entry_points

    found: dict[str, InstalledPlugin] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry.name, _describe(entry))
    return found


def find(provider_type: str) -> InstalledPlugin | None:
    return installed().get(provider_type)


def load(provider_type: str) -> ProviderPlugin:
    """The plugin for `provider_type`, imported on first use (once per process).

    Raises `PluginError` when no package declares the type, or when its plugin fails to
    import or has no `create`; the error is remembered, not retried. Its `config_model` is
    as the plugin gave it (`config.py` checks it).
    """
    with _lock:
        cached = _loaded.get(provider_type)
        if cached is None:
            cached = _import(provider_type)
            _loaded[provider_type] = cached
    if isinstance(cached, PluginError):
        raise cached
    return cached


def _import(provider_type: str) -> ProviderPlugin | PluginError:
    from importlib.metadata import entry_points

    entry = next(iter(entry_points(group=ENTRY_POINT_GROUP, name=provider_type)), None)
    if entry is None:
        return PluginError(f"no installed package provides the provider type {provider_type!r}")
    where = _describe(entry).origin
    try:
        target = entry.load()
    except Exception as exc:  # whatever a broken package raises on import
        log.warning("provider plugin %r failed to load: %s", provider_type, exc, exc_info=True)
        return PluginError(f"plugin {where} failed to load: {type(exc).__name__}: {exc}")
    create = getattr(target, "create", None)
    if not callable(create):
        return PluginError(f"plugin {where} has no create(name, config, env) function")
    return ProviderPlugin(create=create, config_model=getattr(target, "config_model", None))


def _describe(entry: EntryPoint) -> InstalledPlugin:
    dist = entry.dist
    distribution = f"{dist.name} {dist.version}" if dist is not None else None
    return InstalledPlugin(type=entry.name, value=entry.value, distribution=distribution)


def forget() -> None:
    """Drop what was loaded (for tests that install and remove plugins)."""
    with _lock:
        _loaded.clear()
