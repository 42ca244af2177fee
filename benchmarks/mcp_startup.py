"""What a session's MCP servers cost the editor: `session/new` with 0, 1 and 5 stdio servers,
and how long the first prompt then waits for them.

Each run starts a fresh `python -m acp_agent` (offline echo provider, a throwaway state dir,
`mcp_connect_timeout` of a minute) and drives it over its stdio like an editor; the agent's
own start is not counted. The servers are copies of the test server
`tests/mcp_servers/everything.py` (a real SDK server). Timed, per run:

- new: `session/new` with N `mcpServers`, from the request to its answer (the process's
  first session with servers: it pays whatever the agent does for them before it answers;
  a session without servers and its one prompt go first, so loading the config and provider
  and building the tools are not counted);
- wait: the first prompt's extra wait for the servers: the first prompt, sent at once after
  that answer, less a later prompt of the same session (the echo model costs the same);
- own: the slowest server's own start, measured alone before the agent runs: N copies
  started at once, each timed until it answers `initialize`.

Reported: the median, min and max over the runs, in milliseconds; "wait - own" is what the
agent adds to the slowest server's start (its `mcp` import, the handshake, listing). Last,
the agent's MCP client import alone (the `mcp` SDK's client, as the agent loads it; spawn
to exit, less the interpreter's start): the servers start while it runs, so the wait is at
least the longer of the two, and with more servers than cores they share the CPU with it.

    uv run python benchmarks/mcp_startup.py            # 5 runs each
    uv run python benchmarks/mcp_startup.py --runs 9
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "mcp_servers" / "everything.py"
CONFIG = """
default_model = "echo/echo"
mcp_connect_timeout = 60.0

[providers.echo]
type = "echo"
models = [{ id = "echo" }]
"""
COUNTS = (0, 1, 5)
TIMEOUT = 60.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


@dataclass(frozen=True)
class Run:
    new: float
    wait: float
    own: float


def _servers(count: int) -> list[dict[str, Any]]:
    return [
        {"name": f"s{i}", "command": sys.executable, "args": [str(SERVER), f"s{i}"], "env": []}
        for i in range(count)
    ]


def _environment(home: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": home}
    if "PYTHONPATH" in os.environ:  # to measure another tree with this interpreter
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


# --- the servers alone -----------------------------------------------------------------------


def _own_start(count: int, home: str) -> float:
    """Seconds until the slowest of `count` servers, started at once, answers `initialize`."""
    if count == 0:
        return 0.0
    began = time.perf_counter()
    servers = [
        subprocess.Popen(
            [sys.executable, str(SERVER), f"s{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_environment(home),
            cwd=home,
        )
        for i in range(count)
    ]
    answered: list[float] = []

    def initialize(server: subprocess.Popen[bytes]) -> None:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        server.stdin.flush()
        while line := server.stdout.readline():
            if json.loads(line).get("id") == 1:
                answered.append(time.perf_counter() - began)
                return

    threads = [threading.Thread(target=initialize, args=(server,)) for server in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    for server in servers:
        server.kill()
        server.wait()
    if len(answered) != count:
        raise SystemExit("a server did not answer initialize")
    return max(answered)


# --- through the agent -----------------------------------------------------------------------


def _answer(stdout: IO[bytes], request_id: int) -> dict[str, Any]:
    """Read frames until the answer to `request_id` (notifications are skipped)."""
    while True:
        line = stdout.readline()
        if not line:
            raise SystemExit("the agent ended before it answered")
        frame = json.loads(line)
        if frame.get("id") == request_id and "method" not in frame:
            if "error" in frame:
                raise SystemExit(f"the agent answered an error: {frame['error']}")
            return dict(frame)


def one_run(count: int, log: IO[bytes]) -> Run:
    with tempfile.TemporaryDirectory() as home:
        own = _own_start(count, home)
        config = Path(home) / "agent.toml"
        config.write_text(CONFIG, encoding="utf-8")
        agent = subprocess.Popen(
            [sys.executable, "-m", "acp_agent", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=_environment(home),
            cwd=home,
        )
        assert agent.stdin is not None and agent.stdout is not None
        ids = iter(range(1, 100))

        def request(method: str, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
            request_id = next(ids)
            frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            assert agent.stdin is not None and agent.stdout is not None
            began = time.perf_counter()
            agent.stdin.write(json.dumps(frame).encode() + b"\n")
            agent.stdin.flush()
            answer = _answer(agent.stdout, request_id)
            return time.perf_counter() - began, answer

        def prompt(session_id: str) -> float:
            text = [{"type": "text", "text": "hi"}]
            return request("session/prompt", {"sessionId": session_id, "prompt": text})[0]

        try:
            request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            # The agent loads its config and provider after `initialize`, and builds its tools
            # for the process's first prompt: a session without servers and one prompt
            # first, so that only the servers' share is timed below.
            _, serverless = request("session/new", {"cwd": home, "mcpServers": []})
            prompt(serverless["result"]["sessionId"])
            new, answer = request("session/new", {"cwd": home, "mcpServers": _servers(count)})
            session_id = answer["result"]["sessionId"]
            first = prompt(session_id)
            later = min(prompt(session_id) for _ in range(3))
        finally:
            agent.stdin.close()  # stdin EOF: the agent closes every server and exits
            agent.wait(TIMEOUT)
        return Run(new=new, wait=max(first - later, 0.0), own=own)


# --- report ----------------------------------------------------------------------------------


def _figures(seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return f"{statistics.median(ms):>7.0f} {min(ms):>5.0f} {max(ms):>5.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{args.runs} runs each; milliseconds: median min max")
    print(f"{'servers':>7}  {'new':^19}  {'wait':^19}  {'own':^19}  {'wait - own':^19}")
    with tempfile.NamedTemporaryFile(
        "wb", prefix="mcp-startup-", suffix=".log", delete=False
    ) as log:
        for count in COUNTS:
            runs = [one_run(count, log) for _ in range(args.runs)]
            print(
                f"{count:>7}  {_figures([r.new for r in runs])}"
                f"  {_figures([r.wait for r in runs])}"
                f"  {_figures([r.own for r in runs])}"
                f"  {_figures([r.wait - r.own for r in runs])}",
                flush=True,
            )
    print(f"(the agents' stderr: {log.name})")
    client = statistics.median(_client_import() for _ in range(args.runs))
    print(
        f"the agent's MCP client import alone: {client * 1000:.0f} ms (median; "
        f"{os.cpu_count()} CPUs)"
    )


def _client_import() -> float:
    """Seconds the agent's MCP client import takes in a fresh process, beyond the bare
    interpreter's start (both with the config it needs, which the agent has loaded)."""

    def spawn_to_exit(program: str) -> float:
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", program], check=True, cwd=ROOT)
        return time.perf_counter() - began

    base = spawn_to_exit("import acp_agent.config")
    # As the hub imports it: the SDK's client, without the server side its packages import.
    client = "from acp_agent.mcp_bridge import _sdk, hub\n"
    client += "_sdk.import_without_server_side(hub._CONNECTION)"
    return spawn_to_exit(f"import acp_agent.config\n{client}") - base


if __name__ == "__main__":
    main()
