"""`acp-agent` serves ACP on stdio; `acp-agent run PROMPT` drives it headless; `models`,
`config` and `doctor` help set it up (`commands/`).

This is the composition root: the one place that knows every room and wires them (the
protocol server is handed a loader that builds the agent; nothing below imports upward).
Heavy modules are imported inside functions, so `initialize` is answered before they load;
a plain `acp-agent` (what editors start) reads its few options without building the
commands' parsers or importing their code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, NoReturn

from ._hardening import forbid_inspection

# What a plain `acp-agent` needs before it answers `initialize` is imported above; the rest
# (argparse, logging, the config file's reader) where it is used, after that answer.
if TYPE_CHECKING:
    import argparse
    import signal
    from collections.abc import Callable

    from anyio import CancelScope
    from anyio.abc import TaskGroup

    from .commands._common import Subcommands
    from .protocol.client import ClientProxy
    from .protocol.server import Startup

LOGGER = "acp_agent"

MODEL_FACTS_FILE = "model-facts.json"
"""In the state directory: what the model catalogs said of the configured models today."""

SERVE_HINT = (
    "acp-agent: serving ACP on stdin/stdout for an editor to drive; to try it yourself, "
    'run `acp-agent run "Say hello"` (Ctrl-D quits, --help lists the commands)'
)


def main(argv: Sequence[str] | None = None) -> int:
    # First, before any child can exist: none may read our keys in /proc/<our pid>/environ.
    unprotected = forbid_inspection()
    words = sys.argv[1:] if argv is None else list(argv)
    if (serve_args := _serve_options(words)) is not None:
        return _serve(serve_args, unprotected)
    try:
        return _command(words, unprotected)
    except BrokenPipeError:  # `acp-agent models | head -1`: end as Unix tools do
        from .runner._pipes import EXIT_CLOSED_PIPE, discard_stdout

        discard_stdout()
        return EXIT_CLOSED_PIPE


def _command(words: list[str], unprotected: str | None) -> int:
    """A command (or --help, --version, a usage error) read with the full parser."""
    try:
        return _parsed_command(words, unprotected)
    except _Mistake as mistake:
        # What argparse prints (usage, then the error); a script that asked for JSON gets
        # the result object too, as for every other refused run.
        mistake.parser.print_usage(sys.stderr)
        print(f"{mistake.parser.prog}: error: {mistake.message}", file=sys.stderr, flush=True)
        output = _output_asked(words)
        if output is not None:
            from .runner import print_usage_error

            print_usage_error(mistake.message, output)
        raise SystemExit(EXIT_USAGE) from None  # as argparse does, for callers of main()


def _output_asked(words: Sequence[str]) -> str | None:
    """The `--output` / `-o` value among `words`, if any (read without the parser)."""
    found = None
    for word, following in zip(words, [*words[1:], ""], strict=True):
        if word in ("-o", "--output"):
            found = following
        elif word.startswith("--output="):
            found = word.removeprefix("--output=")
        elif word.startswith("-o") and len(word) > 2:
            found = word[2:]
    return found


def _parsed_command(words: list[str], unprotected: str | None) -> int:
    parser = _parser()
    # Options go anywhere, before or after the command (`run --log-level debug`): the
    # subcommands repeat them. Words argparse left over are the rest of a `run` prompt
    # (`run fix the --yes tests` is the prompt "fix the tests" with --yes).
    args, extra = parser.parse_known_args(words)
    if args.command != "run":
        for name, flag in _RUN_OPTIONS.items():
            if hasattr(args, name):
                parser.error(f"{flag} is an option of run (acp-agent run {flag} ... PROMPT)")
    if extra:
        if args.command != "run" or any(word.startswith("-") and word != "-" for word in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.prompt = [*args.prompt, *extra]
    if args.command == "run":
        from .runner import run_headless

        return int(run_headless(args))
    if (command := _user_command(args.command)) is not None:
        return command(args)
    return _serve(args, unprotected)


def _user_command(name: str | None) -> Callable[[argparse.Namespace], int] | None:
    """The entry point of a command beside `run`, if `name` is one. Their modules are
    loaded already (they built their parsers); each loads its heavy parts when it runs."""
    from .commands import config_command, doctor, list_models
    from .commands.login import login_command, logout_command
    from .commands.sessions import sessions_command

    commands = {
        "models": list_models,
        "config": config_command,
        "doctor": doctor,
        "login": login_command,
        "logout": logout_command,
        "sessions": sessions_command,
    }
    return commands.get(name) if name is not None else None


EXIT_USAGE = 2
EXIT_CODES = """exit codes:
  0    done (run: the turn ended normally)
  1    failed (run: the agent answered with an error or died; doctor: a check failed)
  2    usage or configuration error: nothing was started
  3    run: the turn stopped short (output token limit, request limit, refusal)
  130  cancelled with Ctrl-C
  141  stdout was closed by its reader (`| head`)"""


class _Mistake(Exception):
    """A usage error argparse found, raised instead of exiting (so `-o json` can add its
    JSON object)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


_SERVE_OPTIONS = {"--config": "config", "--log-file": "log_file", "--log-level": "log_level"}
_LOG_LEVELS = ("debug", "info", "warning", "error")


def _serve_options(words: Sequence[str]) -> SimpleNamespace | None:
    """The options of a plain `acp-agent`, read without the full parser; None for anything
    else (a command, --help, --version, a mistake), which the full parser handles."""
    found: dict[str, str | None] = dict.fromkeys(_SERVE_OPTIONS.values())
    debug = False
    rest = iter(words)
    for word in rest:
        if word == "--debug":
            debug = True
            continue
        option, equals, value = word.partition("=")
        key = _SERVE_OPTIONS.get(option)
        if key is None:
            return None
        if not equals:
            value = next(rest, "-")
            if value.startswith("-"):  # argparse would refuse it: let it say why
                return None
        found[key] = value
    if found["log_level"] not in (None, *_LOG_LEVELS):
        return None
    return SimpleNamespace(command=None, debug=debug, **found)


def _is_tty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


def _common_options(*, suppress: bool) -> argparse.ArgumentParser:
    import argparse

    """Options every command takes. Under a command they default to SUPPRESS, so one given
    before the command (`acp-agent --config F run ...`) is not reset by the command's own."""
    common = argparse.ArgumentParser(
        add_help=False, argument_default=argparse.SUPPRESS if suppress else None
    )
    common.add_argument(
        "--config",
        metavar="FILE",
        help="TOML config file (default: $ACP_AGENT_CONFIG, else ~/.config/acp-agent/config.toml "
        "if it exists, else the environment)",
    )
    common.add_argument("--log-file", metavar="FILE", help="write logs here instead of stderr")
    common.add_argument(
        "--log-level",
        choices=_LOG_LEVELS,
        help="how much to log (default: the config's log_level, else info)",
    )
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="show tracebacks (and, for run, the agent's log on stderr)",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    import argparse

    from . import __version__

    class Parser(argparse.ArgumentParser):  # its subcommands' parsers are of this class too
        def error(self, message: str) -> NoReturn:
            raise _Mistake(self, message)

    parser: argparse.ArgumentParser = Parser(
        prog="acp-agent",
        description="Any LLM API as a coding agent in editors that speak ACP. With no command, "
        "serve ACP on stdin/stdout (what editors start).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common_options(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"acp-agent {__version__}")
    _add_run_options(parser.add_argument_group("options of run (given before it or after it)"))
    common = [_common_options(suppress=True)]
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(commands, common)
    _add_models(commands, common)
    _add_config(commands, common)
    _add_doctor(commands, common)
    from .commands.login import add_login_commands

    add_login_commands(commands, common)
    from .commands.sessions import add_sessions_commands

    add_sessions_commands(commands, common)
    return parser


def _add_run(commands: Subcommands, common: list[argparse.ArgumentParser]) -> None:
    import argparse

    run = commands.add_parser(
        "run",
        parents=common,
        help="run one prompt headless and print the result",
        description="Run one prompt headless: start the agent, send the prompt, print the "
        "reply on stdout (tool calls and notices on stderr).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "prompt",
        nargs="*",
        metavar="PROMPT",
        help="the prompt; several words are joined with spaces; `-` (or no prompt, with "
        "stdin a pipe) reads it from stdin",
    )
    _add_run_options(run)


_RUN_OPTIONS = {
    "cwd": "--cwd",
    "yes": "--yes",
    "no_project_instructions": "--no-project-instructions",
    "model": "--model",
    "output": "--output",
}
"""The options of `run` (by their namespace name), also taken before it (`--yes run hi`)."""


def _add_run_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`run`'s options. No defaults (SUPPRESS): one given before `run` is not reset by the
    subcommand's parser, and the runner fills in what none gave."""
    import argparse

    unset = argparse.SUPPRESS
    parser.add_argument("--cwd", default=unset, help="session working directory (default: .)")
    parser.add_argument(
        "--yes", "-y", action="store_true", default=unset, help="approve every permission request"
    )
    parser.add_argument(
        "--no-project-instructions",
        action="store_true",
        default=unset,
        help="give the model no instruction files (AGENTS.md, CLAUDE.md ...); skills and "
        "prompt files stay",
    )
    parser.add_argument(
        "--model",
        "-m",
        default=unset,
        help="the model, 'provider/model' or a configured model id (see models)",
    )
    parser.add_argument(
        "--output",
        "-o",
        choices=("text", "json", "stream-json"),
        default=unset,
        help="text: the reply as it streams (default); json: one JSON object at the end; "
        "stream-json: one JSON event per line as they happen",
    )


def _add_models(commands: Subcommands, common: list[argparse.ArgumentParser]) -> None:
    models = commands.add_parser(
        "models",
        parents=common,
        help="list the configured providers and models, and which have a key",
        description="List the configured providers and models, and which have a key. Providers "
        "an editor routes or adds (ACP providers/set) live in its connection only: not listed.",
    )
    models.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_config(commands: Subcommands, common: list[argparse.ArgumentParser]) -> None:
    from .commands import STARTER_PROVIDERS

    config = commands.add_parser("config", parents=common, help="write or locate a config file")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    init = actions.add_parser(
        "init",
        parents=common,
        help="write a commented starter config for a provider",
        description="Write a commented starter config for PROVIDER to the user's config file "
        "(or --path), which acp-agent then reads by default.",
    )
    init.add_argument(
        "provider",
        metavar="PROVIDER",
        choices=STARTER_PROVIDERS,
        help="one of: " + ", ".join(STARTER_PROVIDERS),
    )
    init.add_argument("--path", metavar="FILE", help="write here instead of the user's config")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    actions.add_parser("path", parents=common, help="print the config file acp-agent reads")


def _add_doctor(commands: Subcommands, common: list[argparse.ArgumentParser]) -> None:
    doctor = commands.add_parser(
        "doctor",
        parents=common,
        help="check the config, keys, providers and client tools",
        description="Check that the config is valid, keys are present, each provider answers "
        "and the client tools are found. Exit 1 if a check failed. Providers an editor routes "
        "or adds (ACP providers/set) live in its connection only and are not checked: a key "
        "missing here may be one the editor's gateway supplies.",
    )
    doctor.add_argument("--offline", action="store_true", help="do not contact the providers")
    doctor.add_argument(
        "--timeout", type=float, default=5.0, help="seconds per provider check (default 5)"
    )


def _serve(args: argparse.Namespace | SimpleNamespace, unprotected: str | None) -> int:
    import gc

    from .protocol.dialect import answer_first_initialize

    # No collection while start-up imports (~10% of their time); the loader turns it on.
    gc.disable()

    if _is_tty(sys.stdin):
        print(SERVE_HINT, file=sys.stderr, flush=True)
    frames_in, frames_out = _claim_stdio()
    # Before anything heavy loads, the event loop included: what an editor waits on first.
    greeted, frames = answer_first_initialize(frames_in, frames_out)

    import logging

    import anyio

    from . import logs, paths
    from .protocol.server import serve
    from .rpc.framing import FdSink

    log = logging.getLogger(LOGGER)
    config_path = paths.config_path(args.config)
    level, file = logs.settings_from_config(config_path)
    logs.configure(args.log_level or level or "info", args.log_file or file)
    if unprotected:
        log.debug("process hardening: %s", unprotected)
    load = agent_loader(args.config, os.environ)

    terminated: list[signal.Signals] = []

    async def serve_until_terminated() -> None:
        # SIGTERM / SIGHUP end the connection as stdin EOF would: every session's work is
        # cancelled and its MCP servers are closed, so no child outlives us.
        async with anyio.create_task_group() as group:
            group.start_soon(_cancel_on_termination, group.cancel_scope, terminated)
            await serve(frames, FdSink(frames_out), load=load, greeted=greeted)
            group.cancel_scope.cancel()

    try:
        anyio.run(serve_until_terminated)
    except KeyboardInterrupt:
        return 130
    if terminated:
        # The worker thread reading stdin is still blocked in read() (the editor kept the
        # pipe open), and the interpreter would wait for it at exit: leave without it.
        from . import telemetry

        telemetry.shutdown()  # what the interpreter's exit would have sent
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)
    return 0


async def _cancel_on_termination(scope: CancelScope, terminated: list[signal.Signals]) -> None:
    import logging
    import signal

    import anyio

    log = logging.getLogger(LOGGER)

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
        import gc

        try:
            return prepare()
        finally:
            # What is loaded now lives as long as the process: keep the collector's full
            # passes from walking it again and again (they paused prompts by tens of ms).
            gc.freeze()
            gc.enable()  # `_serve` turned it off for the imports, which leave no garbage

    def prepare() -> Startup | str:
        import logging
        from pathlib import Path

        from . import logs, telemetry
        from .agent import Agent
        from .catalog import with_catalog
        from .child_env import agent_secrets
        from .config import ConfigError, load_config
        from .credentials import CredentialStore, StoredKeys, credentials_path
        from .providers.pool import ProviderPool
        from .providers.usage import load_encoder
        from .sessions.manager import SessionManager
        from .sessions.redaction import Redactor, changing_with
        from .sessions.store import SessionStore, default_state_dir

        # Keys `acp-agent login` stored: each provider's last resort, looked up when needed.
        credentials = CredentialStore(credentials_path(env))
        try:
            config = load_config(config_path, env, StoredKeys(credentials))
        except ConfigError as exc:
            return str(exc)
        state_dir = Path(config.state_dir) if config.state_dir else default_state_dir(env)
        # Context windows, output limits and prices the config leaves unset, from the
        # catalogs shipped as packages (~0.2 s), or what they said earlier today.
        config = with_catalog(config, cache_file=state_dir.expanduser() / MODEL_FACTS_FILE)
        logging.getLogger(LOGGER).info(
            "configuration: %s; default model %s", config.source, config.default_choice
        )
        # The provider's module (~50 ms with its HTTP client) is not imported here: the pool
        # imports it in a worker thread for the first prompt, so a session answers sooner;
        # nor is the token encoder loaded: the sessions load it after their first answer.
        # Our own keys, wherever they come from, never reach the session files: also a key
        # `acp-agent login` stores while we run (read again when the credentials file changes).
        secrets = changing_with(credentials.path, lambda: agent_secrets(config, env))
        store = SessionStore(state_dir.expanduser(), secrets)
        # Nor the log (frames quote what the editor sent, errors what the server said).
        logs.redact_with(Redactor(secrets).line)
        # Spans only when the OTLP variables ask for them; else OpenTelemetry stays unloaded.
        telemetry.from_environment(env)

        def start(client: ClientProxy, background: TaskGroup) -> Agent:
            import anyio.to_thread

            from .sessions.retention import sweep

            # Old sessions and never-prompted leftovers go, beside the first requests.
            background.start_soon(
                anyio.to_thread.run_sync, sweep, store, config.session_retention_days
            )
            providers = ProviderPool(config, env)
            sessions = SessionManager(
                config,
                client,
                providers,
                store,
                env=env,
                load_encoder=load_encoder,
                background=background,
            )

            async def logout() -> list[str]:
                import anyio.to_thread

                forgotten = await anyio.to_thread.run_sync(credentials.remove)
                providers.forget_keys()
                return forgotten

            return Agent(config, sessions, client, logout=logout)

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
