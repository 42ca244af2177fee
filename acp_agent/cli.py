"""`acp-agent` serves ACP on stdio; `acp-agent run PROMPT` drives it headless."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import __version__, logs


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
        "--log-level", default="info", choices=("debug", "info", "warning", "error")
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

    logs.configure(args.log_level, args.log_file)
    frames_in, frames_out = _claim_stdio()
    try:
        anyio.run(
            lambda: serve(
                FdSource(frames_in), FdSink(frames_out), config_path=args.config, env=os.environ
            )
        )
    except KeyboardInterrupt:
        return 130
    return 0


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
