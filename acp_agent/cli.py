"""`acp-agent` serves ACP on stdio; `acp-agent run PROMPT` drives it headless.

This is the composition root: the one place that knows every room and wires them (the
protocol server is handed a loader that builds the agent; nothing below imports upward).
Heavy modules are imported inside functions, so `initialize` is answered before they load.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__, logs

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio import CancelScope
    from anyio.abc import TaskGroup

    from .protocol.client import ClientProxy
    from .protocol.server import Startup

log = logging.getLogger("acp_agent")

CONFIG_ENV_VAR = "ACP_AGENT_CONFIG"  # as in config.py, which is too heavy to import here


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        from .runner import run_headless

        exit_code: int = run_headless(args)
        return exit_code
    return _serve(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-agent",
        description="Any LLM API as a coding agent in editors that speak ACP.",
    )
    parser.add_argument("--version", action="version", version=f"acp-agent {__version__}")
    parser.add_argument("--config", help="TOML config file (default: $ACP_AGENT_CONFIG, else env)")
    parser.add_argument("--log-file", help="write logs here instead of stderr")
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="how much to log (default: the config's log_level, else info)",
    )
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="run one prompt headless and print the result")
    run.add_argument("prompt", nargs="+", help="the prompt text")
    run.add_argument("--config", dest="run_config", help="TOML config file")
    run.add_argument("--cwd", default=None, help="session working directory (default: .)")
    run.add_argument("--yes", "-y", action="store_true", help="approve every permission request")
    run.add_argument("--debug", action="store_true", help="show tracebacks and agent logs")
    return parser


def _serve(args: argparse.Namespace) -> int:
    import anyio

    from .protocol.server import serve
    from .rpc.framing import FdSink, FdSource

    config_path = args.config or os.environ.get(CONFIG_ENV_VAR) or None
    level, file = logs.settings_from_config(config_path)
    logs.configure(args.log_level or level or "info", args.log_file or file)
    frames_in, frames_out = _claim_stdio()
    load = agent_loader(args.config, os.environ)

    terminated: list[signal.Signals] = []

    async def serve_until_terminated() -> None:
        # SIGTERM / SIGHUP end the connection as stdin EOF would: every session's work is
        # cancelled and its MCP servers are closed, so no child outlives us.
        async with anyio.create_task_group() as group:
            group.start_soon(_cancel_on_termination, group.cancel_scope, terminated)
            await serve(FdSource(frames_in), FdSink(frames_out), load=load)
            group.cancel_scope.cancel()

    try:
        anyio.run(serve_until_terminated)
    except KeyboardInterrupt:
        return 130
    if terminated:
        # The worker thread reading stdin is still blocked in read() (the editor kept the
        # pipe open), and the interpreter would wait for it at exit: leave without it.
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)
    return 0


async def _cancel_on_termination(scope: CancelScope, terminated: list[signal.Signals]) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for number in signals:
            terminated.append(signal.Signals(number))
            log.info("%s: shutting down", signal.Signals(number).name)
            scope.cancel()
            return


def agent_loader(config_path: str | None, env: Mapping[str, str]) -> Callable[[], Startup | str]:
    """What the server runs in a worker thread once `initialize` is answered: the heavy
    imports and the config; it returns how to build the agent, or the config's error."""

    def load() -> Startup | str:
        importlib.import_module("acp_agent.protocol.schema")
        from .agent import Agent
        from .child_env import agent_secrets
        from .config import ConfigError, load_config
        from .providers import provider_module_for
        from .providers.pool import ProviderPool
        from .providers.usage import load_encoder
        from .sessions.manager import SessionManager
        from .sessions.store import SessionStore, default_state_dir

        try:
            config = load_config(config_path, env)
        except ConfigError as exc:
            return str(exc)
        log.info("configuration: %s; default model %s", config.source, config.default_choice)
        _, provider, _ = config.find_model(config.default_choice)
        importlib.import_module(provider_module_for(provider))
        encoder = load_encoder()
        state_dir = Path(config.state_dir) if config.state_dir else default_state_dir(env)
        # Our own keys, wherever they come from, never reach the session files.
        store = SessionStore(state_dir.expanduser(), agent_secrets(config, env))

        # What is loaded now lives as long as the process: keep the collector's full passes
        # from walking it again and again (they paused prompts by tens of milliseconds).
        gc.freeze()

        def start(client: ClientProxy, background: TaskGroup) -> Agent:
            sessions = SessionManager(
                config,
                client,
                ProviderPool(config, env),
                store,
                env=env,
                encoder=encoder,
                background=background,
            )
            return Agent(config, sessions, client)

        return start

    return load


def _claim_stdio() -> tuple[int, int]:
    """Keep private copies of fd 0 and 1 for frames; point the originals elsewhere.

    Stray prints (ours or a library's) then land on stderr, and child processes inherit
    /dev/null and stderr instead of our protocol streams.
    """
    sys.stdout.flush()
    frames_in, frames_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    return frames_in, frames_out


if __name__ == "__main__":
    sys.exit(main())
