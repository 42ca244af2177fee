"""The user commands beside `run`: `models`, `config init|path`, `doctor`, and `login` /
`logout` (`commands.login`).

Like `run`, they sit on the top floor: they read the config and call public entry points.
Each prints its result on stdout and problems as one stderr line per problem, exits 0 when
all is well, 1 when a check failed and 2 on bad configuration or usage.

The parser (`cli.py`) is built on every start, the server's too, so this module stays
light: the commands' modules are imported only when one runs. `commands.login` adds its
own subcommands to that parser, so it is imported on every start: standard library only
at import.
"""

from __future__ import annotations

import argparse

from ._starters import STARTER_PROVIDERS

__all__ = ["STARTER_PROVIDERS", "config_command", "doctor", "list_models"]


def list_models(args: argparse.Namespace) -> int:
    """`acp-agent models`."""
    from ._models import main

    return main(args)


def config_command(args: argparse.Namespace) -> int:
    """`acp-agent config init PROVIDER` and `acp-agent config path`."""
    from ._config_init import main

    return main(args)


def doctor(args: argparse.Namespace) -> int:
    """`acp-agent doctor`."""
    from ._doctor import main

    return main(args)
