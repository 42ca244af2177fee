"""What the user commands share, standard library only (`commands.login` is imported on
every start): their exit codes (`cli.EXIT_CODES` explains them), the default variable of
each keyed provider type, and the type of the parser's subcommand table."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from typing import TypeAlias

    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK = 0
EXIT_FAILED = 1
"""A check failed, or the command could not do its work."""
EXIT_USAGE = 2
"""Bad usage or configuration: nothing was done."""

DEFAULT_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "azure-openai": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
"""Where a provider of each type finds its key when its config names no variable."""
