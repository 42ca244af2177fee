"""One headless run: validate the config, start the agent, send one prompt, print the turn.

The reply streams to stdout (`--output text`), or the turn is printed as JSON at the end or
as it happens (`_output.py`). The agent's log goes to the run logs (`_logs.py`).

Exit codes: 0 the turn ended normally (`end_turn`); 1 the agent answered with an error or
died; 2 bad configuration or usage (nothing was started); 3 the turn stopped short
(`max_tokens`, `max_turn_requests`, `refusal`); 130 cancelled with Ctrl-C; 141 stdout's
reader went away (`| head`, see `_pipes.py`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from .. import __version__, paths
from ..child_env import child_environment
from ..config import AgentConfig, ConfigError, EchoProviderConfig
from ..logs import log_file_problem
from ..rpc.endpoint import Endpoint
from ..rpc.errors import ConnectionClosed, RpcError
from ..rpc.framing import StreamSink, StreamSource
from ._client import LocalClient, Permissions
from ._console import Console
from ._local import Terminals
from ._logs import open_run_log
from ._options import RunOptions, UsageError, run_options
from ._output import JsonLines, Transcript
from ._pipes import EXIT_CLOSED_PIPE, discard_stdout
from ._status import REFRESH_SECONDS

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


class AgentMisbehaved(Exception):
    """The agent answered, but not with something a v1 client can use."""


def run_headless(args: argparse.Namespace) -> int:
    output = getattr(args, "output", None) or "text"
    debug = bool(getattr(args, "debug", False))
    # The status line shares stderr with the agent's log under --debug: not then.
    console = Console(sys.stdout, sys.stderr, show_reply=output == "text", status=not debug)
    try:
        options, config = run_options(args, os.environ)
    except (ConfigError, UsageError) as exc:
        console.notice(f"acp-agent: {exc}")
        print_usage_error(str(exc), output)
        return EXIT_USAGE
    console.notice(f"acp-agent: {_describe(config, options)}")
    try:
        return anyio.run(_run, options, console, child_environment(os.environ, config), config)
    except KeyboardInterrupt:  # Ctrl-C before our own handler was installed
        console.finish()
        console.notice("acp-agent: cancelled")
        return EXIT_CANCELLED
    except BrokenPipeError:  # stdout's reader left while the run was ending
        discard_stdout()
        return EXIT_CLOSED_PIPE
    except Exception as exc:
        if options.debug:
            traceback.print_exc()
        console.notice(f"acp-agent: error: {type(exc).__name__}: {exc}")
        return EXIT_ERROR


def print_usage_error(message: str, output: str) -> None:
    """--output json / stream-json: a run refused before it started still ends with the
    result object on stdout (exit code 2, the error), so a script reads one shape always."""
    if output not in ("json", "stream-json"):
        return
    result = Transcript().result(
        session_id=None,
        model=None,
        stop_reason=None,
        exit_code=EXIT_USAGE,
        error=message,
        duration_ms=0,
    )
    if output == "stream-json":
        JsonLines(sys.stdout).emit(result)
    else:
        sys.stdout.write(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
        sys.stdout.flush()


def _describe(config: AgentConfig, options: RunOptions) -> str:
    """Which configuration and model the agent will use, and how to change it."""
    choice, provider, _ = config.find_model(options.model or config.default_choice)
    from_file = paths.config_path(options.config_path) is not None
    if isinstance(provider, EchoProviderConfig) and not from_file:
        return (
            "using built-in echo provider (no API key found; set OPENAI_API_KEY, or write a "
            "config with: acp-agent config init PROVIDER)"
        )
    return f"using {choice} from {config.source}"


async def _run(
    options: RunOptions, console: Console, child_env: Mapping[str, str], config: AgentConfig
) -> int:
    # Cancel scopes need a running loop.
    return await _Run(options, console, child_env, config).main()


class _Run:
    def __init__(
        self,
        options: RunOptions,
        console: Console,
        child_env: Mapping[str, str],
        config: AgentConfig,
    ) -> None:
        self._options = options
        self._console = console
        self._started = time.monotonic()
        self._model = options.model or config.default_choice
        self._transcript = Transcript()
        self._events = JsonLines(sys.stdout) if options.output == "stream-json" else None
        self._held: list[dict[str, Any]] | None = [] if self._events is not None else None
        self._stop_reason: str | None = None
        self._error: str | None = None
        self._turn_usage: Any = None
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
        self._stdout_closed = False
        self._log_file_in_config = config.log_file

    async def main(self) -> int:
        log_path, process = await self._start_agent()
        assert process.stdout is not None and process.stdin is not None
        endpoint = Endpoint(StreamSource(process.stdout), StreamSink(process.stdin))
        code = EXIT_ERROR
        try:
            async with anyio.create_task_group() as tg:
                terminals = Terminals(tg, self._options.cwd, self._child_env)
                client = LocalClient(
                    self._console,
                    terminals,
                    self._permissions,
                    self._observe,
                    stdout_closed=self._reader_gone,
                )
                # No drain: once the agent is gone, nobody waits for our answers.
                tg.start_soon(functools.partial(endpoint.serve, client, drain_timeout=0))
                tg.start_soon(self._watch_interrupts, process, endpoint)
                tg.start_soon(self._show_status)
                with self._conversation:
                    code = await self._converse(endpoint)
                if self._stdout_closed:
                    code = EXIT_CLOSED_PIPE
                elif self._conversation.cancelled_caught:
                    code = self._stopped("cancelled")
                self._closing = True
                await terminals.close()
                await _stop_agent(process)  # its exit ends `serve`
                tg.cancel_scope.cancel()  # and this the interrupt watcher
        except Exception as exc:
            self._error = self._error or f"{type(exc).__name__}: {exc}"
            raise
        finally:
            await _stop_agent(process)  # a no-op unless something above failed
            self._console.finish()
            _point_at_log_on_failure(self._console, log_path, code)
            self._report(code)
        return code

    async def _start_agent(self) -> tuple[Path | None, Process]:
        """The agent as a child; its stderr goes to a run log unless --debug."""
        options = self._options
        command = [sys.executable, "-m", "acp_agent"]
        level = "debug" if options.debug else options.log_level
        if level is not None:
            command += ["--log-level", level]
        log_file = self._usable_log_file()
        if options.log_file and log_file:
            command += ["--log-file", log_file]
        if options.config_path:
            command += ["--config", options.config_path]
        env = {**os.environ, **options.agent_env} if options.agent_env else None
        # The agent leads its own session: a Ctrl-C typed on the terminal reaches only us,
        # and we turn it into session/cancel.
        if options.debug:
            process = await anyio.open_process(
                command, stderr=None, env=env, start_new_session=True
            )
            return None, process
        if log_file:
            # The log goes where it was asked to (stray output of the agent's too): no run
            # log beside it, or empty ones would push the useful ones out.
            fd, path = _append_to(log_file)
        else:
            fd, path = open_run_log(options.log_dir)
        try:
            process = await anyio.open_process(command, stderr=fd, env=env, start_new_session=True)
            return path, process
        finally:
            os.close(fd)  # the child holds its own copy

    def _usable_log_file(self) -> str | None:
        """`--log-file` (else the config's `log_file`) when it can be written; one that
        cannot is named on stderr, and the run log takes the agent's log instead."""
        wanted = self._options.log_file or self._log_file_in_config
        if not wanted:
            return None
        problem = log_file_problem(wanted)
        if problem is None:
            return wanted
        self._console.notice(f"acp-agent: {problem}; the agent logs to a run log instead")
        return None

    # --- what is shown -------------------------------------------------------------------

    def _observe(self, update: Any) -> None:
        self._transcript.add(update)
        if self._events is not None and isinstance(update, dict):
            event = {"type": "update", "update": update}
            if self._held is None:
                self._events.emit(event)
            else:
                self._held.append(event)

    def _announce_session(self, session_id: str) -> None:
        """stream-json: the `session` event comes first, then the updates held until now
        (one may arrive before our `session/new` waiter wakes)."""
        if self._events is None or self._held is None:
            return
        held, self._held = self._held, None
        self._events.emit(
            {
                "type": "session",
                "sessionId": session_id,
                "model": self._model,
                "cwd": str(self._options.cwd),
            }
        )
        for event in held:
            self._events.emit(event)

    async def _show_status(self) -> None:
        frame = 0
        while True:
            elapsed = time.monotonic() - self._started
            self._console.refresh_status(self._model, elapsed, frame)
            frame += 1
            await anyio.sleep(REFRESH_SECONDS)

    def _reader_gone(self) -> None:
        """stdout's reader closed the pipe (`| head`): nobody reads the rest, so the run
        ends now, quietly (the agent is stopped as after Ctrl-C)."""
        if not self._stdout_closed:
            self._stdout_closed = True
            discard_stdout()
            self._conversation.cancel()

    def _report(self, code: int) -> None:
        """--output json / stream-json: the result object, the run's last word on stdout."""
        if self._options.output == "text" or self._stdout_closed:
            return
        result = self._transcript.result(
            session_id=self._session_id,
            model=self._model,
            stop_reason=self._stop_reason,
            exit_code=code,
            error=self._error,
            duration_ms=round((time.monotonic() - self._started) * 1000),
            turn_usage=self._turn_usage,
        )
        if self._events is not None:
            for event in self._held or ():  # the run ended before a session was announced
                self._events.emit(event)
            self._events.emit(result)
        else:
            sys.stdout.write(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
            sys.stdout.flush()

    # --- the conversation ----------------------------------------------------------------

    async def _converse(self, endpoint: Endpoint) -> int:
        try:
            await self._initialize(endpoint)
            self._session_id = await self._new_session(endpoint)
            try:
                self._announce_session(self._session_id)
            except BrokenPipeError:
                self._reader_gone()
                return EXIT_CLOSED_PIPE
            await self._choose_model(endpoint, self._session_id)
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
        if isinstance(result, dict):
            self._turn_usage = result.get("usage")
        return self._stopped(stop)

    async def _initialize(self, endpoint: Endpoint) -> None:
        response = await endpoint.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": True, "writeTextFile": True},
                    "terminal": True,
                    # Retry waits and the like print as `notice:` lines, not as thoughts.
                    "session": {"notices": {}},
                },
                "clientInfo": {"name": "acp-agent-run", "version": __version__},
            },
        )
        version = response.get("protocolVersion") if isinstance(response, dict) else None
        if version != PROTOCOL_VERSION:
            raise AgentMisbehaved(f"the agent speaks ACP version {version!r}; we speak 1")

    async def _new_session(self, endpoint: Endpoint) -> str:
        params = {
            "cwd": str(self._options.cwd),
            "mcpServers": [],
            # So stored sessions tell runs from editor sessions (`acp-agent sessions list`).
            "_meta": {"acp-agent/origin": "run"},
        }
        response = await endpoint.request("session/new", params)
        session_id = response.get("sessionId") if isinstance(response, dict) else None
        if not isinstance(session_id, str):
            raise AgentMisbehaved("session/new returned no sessionId")
        current = _current_model(response)
        if current is not None and self._options.model is None:
            self._model = current
        return session_id

    async def _choose_model(self, endpoint: Endpoint, session_id: str) -> None:
        """--model: switch the new session to it, as an editor's model picker does."""
        if self._options.model is None:
            return
        await endpoint.request(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "model", "value": self._options.model},
        )

    def _stopped(self, stop: Any) -> int:
        self._stop_reason = stop if isinstance(stop, str) else None
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
        self._error = message
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


def _append_to(log_file: str) -> tuple[int, Path]:
    """The log file, opened to append (owner-only if new), and its path."""
    path = Path(log_file).expanduser()
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), path


def _kill_agent(process: Process) -> None:
    # The agent leads its own process group: MCP servers and commands it started go too.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _current_model(response: Any) -> str | None:
    """The model a new session starts on, from its `model` config option."""
    options = response.get("configOptions") if isinstance(response, dict) else None
    for option in options if isinstance(options, list) else ():
        if isinstance(option, dict) and option.get("id") == "model":
            value = option.get("currentValue")
            return value if isinstance(value, str) else None
    return None


def _point_at_log_on_failure(console: Console, log_path: Path | None, code: int) -> None:
    """Run logs are kept (the newest few); a failed run says where its log is."""
    if log_path is None:
        return
    with suppress(OSError):
        if code == EXIT_ERROR and log_path.stat().st_size > 0:
            console.notice(f"acp-agent: the agent's log is in {log_path}")
