"""One headless run: validate the config, start the agent, send one prompt, print the turn.

Exit codes: 0 the turn ended normally (`end_turn`); 1 the agent answered with an error or
died; 2 bad configuration or usage (nothing was started); 3 the turn stopped short
(`max_tokens`, `max_turn_requests`, `refusal`); 130 cancelled with Ctrl-C.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from .. import __version__
from ..child_env import child_environment
from ..config import CONFIG_ENV_VAR, AgentConfig, ConfigError, EchoProviderConfig, load_config
from ..rpc.endpoint import Endpoint
from ..rpc.errors import ConnectionClosed, RpcError
from ..rpc.framing import StreamSink, StreamSource
from ._client import LocalClient, PermissionMode, Permissions
from ._console import Console
from ._local import Terminals

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_STOPPED = 3
EXIT_CANCELLED = 130

PROTOCOL_VERSION = 1
# After its stdin closes the agent should exit at once; past this it is killed.
AGENT_EXIT_SECONDS = 5.0

STOPPED_SHORT = {
    "max_tokens": "the model reached its output token limit",
    "max_turn_requests": "the turn reached its limit of model requests",
    "refusal": "the model refused to continue",
}


class UsageError(Exception):
    """Bad command-line input; the message is ready to show."""


class AgentMisbehaved(Exception):
    """The agent answered, but not with something a v1 client can use."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    prompt: str
    config_path: str | None
    cwd: Path
    permissions: PermissionMode
    debug: bool
    log_level: str | None
    """None: the config file's, else info."""


def run_headless(args: argparse.Namespace) -> int:
    console = Console(sys.stdout, sys.stderr)
    try:
        options = _options(args)
        config = load_config(options.config_path, os.environ)
    except (ConfigError, UsageError) as exc:
        console.notice(f"acp-agent: {exc}")
        return EXIT_USAGE
    console.notice(f"acp-agent: {_describe(config, options.config_path)}")
    try:
        return anyio.run(_run, options, console, child_environment(os.environ, config))
    except KeyboardInterrupt:  # Ctrl-C before our own handler was installed
        console.finish()
        console.notice("acp-agent: cancelled")
        return EXIT_CANCELLED
    except Exception as exc:
        if options.debug:
            traceback.print_exc()
        console.notice(f"acp-agent: error: {type(exc).__name__}: {exc}")
        return EXIT_ERROR


def _options(args: argparse.Namespace) -> RunOptions:
    cwd = Path(os.path.abspath(args.cwd or os.getcwd()))
    if not cwd.is_dir():
        raise UsageError(f"--cwd: not a directory: {cwd}")
    # `run --config` wins over the top-level `--config`; either names the same kind of file.
    config_path = getattr(args, "run_config", None) or getattr(args, "config", None)
    permissions: PermissionMode
    if args.yes:
        permissions = "approve"
    elif sys.stdin.isatty():
        permissions = "ask"
    else:
        permissions = "reject"
    return RunOptions(
        prompt=" ".join(args.prompt),
        config_path=os.path.abspath(config_path) if config_path else None,
        cwd=cwd,
        permissions=permissions,
        debug=bool(getattr(args, "debug", False)),
        log_level=getattr(args, "log_level", None),
    )


def _describe(config: AgentConfig, config_path: str | None) -> str:
    """Which configuration and model the agent will use, and how to change it."""
    choice, provider, _ = config.find_model(config.default_choice)
    from_file = config_path or os.environ.get(CONFIG_ENV_VAR)
    if isinstance(provider, EchoProviderConfig) and not from_file:
        return "using built-in echo provider (no API key found; set OPENAI_API_KEY or use --config)"
    return f"using {choice} from {config.source}"


async def _run(options: RunOptions, console: Console, child_env: Mapping[str, str]) -> int:
    return await _Run(options, console, child_env).main()  # cancel scopes need a running loop


class _Run:
    def __init__(self, options: RunOptions, console: Console, child_env: Mapping[str, str]) -> None:
        self._options = options
        self._console = console
        # For the terminals the agent asks for; the agent itself inherits all of ours, keys
        # included: that is how it reaches its model.
        self._child_env = child_env
        self._permissions = Permissions(console, options.permissions)
        # Created now so that Ctrl-C can cancel it even before the conversation starts.
        self._conversation = anyio.CancelScope()
        self._session_id: str | None = None
        self._prompting = False
        self._closing = False
        self._interrupts = 0

    async def main(self) -> int:
        log_path, process = await self._start_agent()
        assert process.stdout is not None and process.stdin is not None
        endpoint = Endpoint(StreamSource(process.stdout), StreamSink(process.stdin))
        code = EXIT_ERROR
        try:
            async with anyio.create_task_group() as tg:
                terminals = Terminals(tg, self._options.cwd, self._child_env)
                client = LocalClient(self._console, terminals, self._permissions)
                # No drain: once the agent is gone, nobody waits for our answers.
                tg.start_soon(functools.partial(endpoint.serve, client, drain_timeout=0))
                tg.start_soon(self._watch_interrupts, process, endpoint)
                with self._conversation:
                    code = await self._converse(endpoint)
                if self._conversation.cancelled_caught:
                    code = self._stopped("cancelled")
                self._closing = True
                await terminals.close()
                await _stop_agent(process)  # its exit ends `serve`
                tg.cancel_scope.cancel()  # and this the interrupt watcher
        finally:
            await _stop_agent(process)  # a no-op unless something above failed
            self._console.finish()
            _keep_log_on_failure(self._console, log_path, code)
        return code

    async def _start_agent(self) -> tuple[Path | None, Process]:
        """The agent as a child; its stderr goes to a temporary log unless --debug."""
        command = [sys.executable, "-m", "acp_agent"]
        level = "debug" if self._options.debug else self._options.log_level
        if level is not None:
            command += ["--log-level", level]
        if self._options.config_path:
            command += ["--config", self._options.config_path]
        # The agent leads its own session: a Ctrl-C typed on the terminal reaches only us,
        # and we turn it into session/cancel.
        if self._options.debug:
            return None, await anyio.open_process(command, stderr=None, start_new_session=True)
        fd, name = tempfile.mkstemp(prefix="acp-agent-run-", suffix=".log")
        try:
            return Path(name), await anyio.open_process(command, stderr=fd, start_new_session=True)
        finally:
            os.close(fd)  # the child holds its own copy

    # --- the conversation ----------------------------------------------------------------

    async def _converse(self, endpoint: Endpoint) -> int:
        try:
            await self._initialize(endpoint)
            self._session_id = await self._new_session(endpoint)
            self._prompting = True
            try:
                result = await endpoint.request(
                    "session/prompt",
                    {
                        "sessionId": self._session_id,
                        "prompt": [{"type": "text", "text": self._options.prompt}],
                    },
                )
            finally:
                self._prompting = False
        except ConnectionClosed:
            if self._interrupts:
                return self._stopped("cancelled")  # we killed it on the second Ctrl-C
            return self._failed("the agent exited before answering")
        except RpcError as exc:
            return self._failed(exc.message)
        except AgentMisbehaved as exc:
            return self._failed(str(exc))
        stop = result.get("stopReason") if isinstance(result, dict) else None
        return self._stopped(stop)

    async def _initialize(self, endpoint: Endpoint) -> None:
        response = await endpoint.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": True, "writeTextFile": True},
                    "terminal": True,
                },
                "clientInfo": {"name": "acp-agent-run", "version": __version__},
            },
        )
        version = response.get("protocolVersion") if isinstance(response, dict) else None
        if version != PROTOCOL_VERSION:
            raise AgentMisbehaved(f"the agent speaks ACP version {version!r}; we speak 1")

    async def _new_session(self, endpoint: Endpoint) -> str:
        response = await endpoint.request(
            "session/new", {"cwd": str(self._options.cwd), "mcpServers": []}
        )
        session_id = response.get("sessionId") if isinstance(response, dict) else None
        if not isinstance(session_id, str):
            raise AgentMisbehaved("session/new returned no sessionId")
        return session_id

    def _stopped(self, stop: Any) -> int:
        if stop == "end_turn":
            return EXIT_OK
        if stop == "cancelled":
            self._console.notice("acp-agent: cancelled")
            return EXIT_CANCELLED
        if stop in STOPPED_SHORT:
            self._console.notice(f"acp-agent: stopped: {STOPPED_SHORT[stop]} ({stop})")
            return EXIT_STOPPED
        return self._failed(f"unexpected stop reason {stop!r}")

    def _failed(self, message: str) -> int:
        self._console.notice(f"acp-agent: error: {message}")
        return EXIT_ERROR

    # --- Ctrl-C --------------------------------------------------------------------------

    async def _watch_interrupts(self, process: Process, endpoint: Endpoint) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as interrupts:
            async for _ in interrupts:
                await self._interrupted(process, endpoint)

    async def _interrupted(self, process: Process, endpoint: Endpoint) -> None:
        """First Ctrl-C: cancel the turn (or the start-up); any later one: kill the agent."""
        self._interrupts += 1
        if self._interrupts > 1 or self._closing:
            self._console.notice("acp-agent: stopping the agent")
            _kill_agent(process)
        elif self._prompting and self._session_id is not None:
            self._console.notice("acp-agent: cancelling (press Ctrl-C again to stop the agent)")
            self._permissions.cancel_all()
            with suppress(RpcError):
                await endpoint.notify("session/cancel", {"sessionId": self._session_id})
        else:
            self._conversation.cancel()


async def _stop_agent(process: Process) -> None:
    """Close the agent's stdin (its signal to exit), wait for it, kill it if it lingers."""
    with anyio.CancelScope(shield=True):
        if process.stdin is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
        with anyio.move_on_after(AGENT_EXIT_SECONDS):
            await process.wait()
        if process.returncode is None:
            _kill_agent(process)
        await process.aclose()


def _kill_agent(process: Process) -> None:
    # The agent leads its own process group: MCP servers and commands it started go too.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _keep_log_on_failure(console: Console, log_path: Path | None, code: int) -> None:
    if log_path is None:
        return
    if code == EXIT_ERROR and log_path.stat().st_size > 0:
        console.notice(f"acp-agent: the agent's log is in {log_path}")
    else:
        log_path.unlink(missing_ok=True)
