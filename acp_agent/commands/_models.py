"""`acp-agent models`: the configured providers and models, and which have a key.

    $ acp-agent models
    configuration: /home/me/.config/acp-agent/config.toml
    openai (openai): OPENAI_API_KEY is set
      * openai/gpt-4.1        GPT-4.1        1,047,576 tokens  $2.00 in, $8.00 out per 1M
        openai/gpt-4.1-mini   GPT-4.1 mini   1,047,576 tokens  $0.40 in, $1.60 out per 1M

`*` marks the model new sessions start on. Below each model, `from:` says where its figures
came from: the config, a catalog entry (`models.dev openai/gpt-4.1`, `genai-prices ...`:
see `acp_agent.catalog`) or the default. Provider types added by installed plugins are
listed last. `--json` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from ..config import AgentConfig, ConfigError, ModelConfig, ProviderConfig, load_config
from ..credentials import stored_keys
from ._common import EXIT_OK, EXIT_USAGE
from ._keys import key_status

EDITOR_ROUTES = (
    "providers an editor routes or adds (ACP providers/set, e.g. an IDE's gateway) live in "
    "its connection only: not listed here"
)
"""Said because an editor's picker may offer models, or keys, that this file has not."""


def main(args: argparse.Namespace) -> int:
    from ..catalog import with_catalog

    try:
        config = load_config(getattr(args, "config", None), os.environ, stored_keys())
    except ConfigError as exc:
        print(f"acp-agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    config = with_catalog(config)  # the figures the agent will use, and their sources
    report = models_report(config, os.environ)
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return EXIT_OK


def models_report(config: AgentConfig, env: Mapping[str, str]) -> dict[str, Any]:
    """What `models --json` prints: the configuration's source, default and providers."""
    default = config.default_choice
    providers = []
    for name, provider in config.providers.items():
        status = key_status(name, provider, env)
        providers.append(
            {
                "name": name,
                "type": provider.type,
                "base_url": getattr(provider, "base_url", None),
                "key": {
                    "state": status.state,
                    "detail": status.detail,
                    "variable": status.variable,
                },
                "models": [_model(name, provider, model, default) for model in provider.models],
                "plugin": _plugin(provider),
            }
        )
    return {
        "configuration": config.source,
        "default_model": default,
        "providers": providers,
        "plugins": _installed_plugins(),
    }


def _plugin(provider: ProviderConfig) -> dict[str, Any] | None:
    """For a provider of a plugin's type: which package, and why it cannot be used."""
    from .. import plugins
    from ..config import PluginProviderConfig

    if not isinstance(provider, PluginProviderConfig):
        return None
    installed = plugins.find(provider.type)
    return {
        "distribution": installed.distribution if installed is not None else None,
        "error": provider.load_error,
    }


def _installed_plugins() -> list[dict[str, Any]]:
    from .. import plugins

    return [
        {"type": plugin.type, "object": plugin.value, "distribution": plugin.distribution}
        for plugin in sorted(plugins.installed().values(), key=lambda plugin: plugin.type)
    ]


def _model(name: str, provider: ProviderConfig, model: ModelConfig, default: str) -> dict[str, Any]:
    choice = f"{name}/{model.id}"
    return {
        "model": choice,
        "id": model.id,
        "name": model.name,
        "default": choice == default,
        "context_window": model.context_window,
        "max_output_tokens": model.max_output_tokens,
        "reasoning": model.reasoning,
        "prices": None if model.prices is None else model.prices.model_dump(exclude_none=True),
        "images": model.images,
        "sources": model.sources,
        "notes": list(model.notes),
    }


def format_report(report: dict[str, Any]) -> str:
    lines = [f"configuration: {report['configuration']}"]
    rows = [model for provider in report["providers"] for model in provider["models"]]
    choice_width = max(len(row["model"]) for row in rows)
    name_width = max(len(row["name"] or "") for row in rows)
    for provider in report["providers"]:
        key = provider["key"]
        lines.append(f"{provider['name']} ({provider['type']}): {key['detail']}")
        if provider["plugin"] is not None:
            plugin = provider["plugin"]
            origin = plugin["distribution"] or "an installed plugin"
            state = f"cannot be used: {plugin['error']}" if plugin["error"] else "loaded"
            lines.append(f"  plugin from {origin}: {state}")
        for row in provider["models"]:
            cells = [
                ("*" if row["default"] else " ") + " " + row["model"].ljust(choice_width),
                (row["name"] or "").ljust(name_width),
                f"{row['context_window']:>9,} tokens",
                _describe_extras(row),
            ]
            lines.append(("  " + "  ".join(cell for cell in cells if cell)).rstrip())
            if origins := _describe_sources(row["sources"]):
                lines.append(f"      from: {origins}")
            lines.extend(f"      note: {note}" for note in row["notes"])
    lines.append("* new sessions start on this model (default_model)")
    lines.append(EDITOR_ROUTES)
    if report["plugins"]:
        added = ", ".join(
            f"{plugin['type']} ({plugin['distribution'] or plugin['object']})"
            for plugin in report["plugins"]
        )
        lines.append(f"provider types from installed plugins: {added}")
    return "\n".join(lines)


def _describe_sources(sources: dict[str, str]) -> str:
    """`context_window, reasoning: models.dev openai/o3; prices: config`, one group per
    source, in the order the figures are listed."""
    grouped: dict[str, list[str]] = {}
    for figure, source in sources.items():
        grouped.setdefault(source, []).append(figure)
    return "; ".join(f"{', '.join(figures)}: {source}" for source, figures in grouped.items())


def _describe_extras(row: dict[str, Any]) -> str:
    extras = []
    prices = row["prices"]
    if prices:
        extras.append(f"${prices['input']:.2f} in, ${prices['output']:.2f} out per 1M")
    if row["reasoning"]:
        extras.append("reasoning")
    if row["images"] is False:
        extras.append("no images (each is sent as a note)")
    return "; ".join(extras)
