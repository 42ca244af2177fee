"""How long a session's MCP servers take to connect: 0, 1 and 5 stdio servers.

The servers are N copies of the test server `tests/mcp_servers/everything.py` (a real SDK
server, spawned as a subprocess); a session is ready once every one is connected (spawned,
`initialize`, tools and prompts listed), all in parallel. Two ways to measure it:

- `--via agent` (the default): a fresh `python -m acp_agent` per run, driven over its stdio
  like an editor (offline echo provider, a throwaway state dir); the time from sending
  `session/new` with N `mcpServers` to its answer. cold: the process's first session, which
  pays for importing the `mcp` SDK; warm: a second session in the same process (what every
  later `session/new` pays).
- `--via hub`: the `McpHub` alone, in a fresh Python process per run: the time until `run`
  reports started (cold: the first hub in the process; warm: a second one).

Reported: the median and max over the runs, in milliseconds.

    uv run python benchmarks/mcp_startup.py            # through the agent, 5 runs each
    uv run python benchmarks/mcp_startup.py --runs 9 --via hub
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "mcp_servers" / "everything.py"
ECHO_CONFIG = ROOT / "configs" / "echo.toml"
COUNTS = (0, 1, 5)
TIMEOUT = 60.0


# --- through the agent -----------------------------------------------------------------------


def _servers(count: int) -> list[dict[str, Any]]:
    return [
        {"name": f"s{i}", "command": sys.executable, "args": [str(SERVER), f"s{i}"], "env": []}
        for i in range(count)
    ]


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


def time_agent(count: int, log: IO[bytes]) -> tuple[float, float]:
    """(cold, warm) seconds of `session/new` with `count` servers in a fresh agent."""
    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": home}
        agent = subprocess.Popen(
            [sys.executable, "-m", "acp_agent", "--config", str(ECHO_CONFIG)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=home,
        )
        assert agent.stdin is not None and agent.stdout is not None
        ids = iter(range(1, 100))

        def request(method: str, params: dict[str, Any]) -> float:
            request_id = next(ids)
            frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            assert agent.stdin is not None and agent.stdout is not None
            began = time.perf_counter()
            agent.stdin.write(json.dumps(frame).encode() + b"\n")
            agent.stdin.flush()
            _answer(agent.stdout, request_id)
            return time.perf_counter() - began

        try:
            request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            # The agent loads its config and provider after `initialize`: a session without
            # servers first would hide the SDK import, so only the session/new calls count.
            times = [
                request("session/new", {"cwd": home, "mcpServers": _servers(count)})
                for _ in range(2)
            ]
        finally:
            agent.stdin.close()  # stdin EOF: the agent closes every server and exits
            agent.wait(TIMEOUT)
        return times[0], times[1]


def bench_agent(runs: int) -> None:
    with tempfile.NamedTemporaryFile(
        "wb", prefix="mcp-startup-", suffix=".log", delete=False
    ) as log:
        for count in COUNTS:
            figures = [time_agent(count, log) for _ in range(runs)]
            _report(count, [c for c, _ in figures], [w for _, w in figures])
    print(f"(the agents' stderr: {log.name})")


# --- the hub alone ---------------------------------------------------------------------------


async def _time_hub(count: int, cwd: Path) -> float:
    from acp_agent.mcp_bridge import McpHub, McpServerSpec

    specs = [
        McpServerSpec(f"s{i}", command=sys.executable, args=(str(SERVER), f"s{i}"))
        for i in range(count)
    ]
    hub = McpHub(specs, cwd=cwd, connect_timeout=30.0)
    started = time.perf_counter()
    async with hub:
        elapsed = time.perf_counter() - started
        failed = [s.describe_failure() for s in hub.statuses() if s.state != "ready"]
        if failed:
            raise SystemExit("\n".join(failed))
    return elapsed


def one_hub_run(count: int) -> None:
    """In a fresh process: print {"cold": s, "warm": s} for `count` servers."""
    import anyio

    with tempfile.TemporaryDirectory() as cwd:
        cold = anyio.run(_time_hub, count, Path(cwd))
        warm = anyio.run(_time_hub, count, Path(cwd))
    print(json.dumps({"cold": cold, "warm": warm}))


def bench_hub(runs: int) -> None:
    for count in COUNTS:
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(runs):
            done = subprocess.run(
                [sys.executable, __file__, "--one", str(count)],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            cold.append(figures["cold"])
            warm.append(figures["warm"])
        _report(count, cold, warm)


# --- report ----------------------------------------------------------------------------------


def _report(count: int, cold: list[float], warm: list[float]) -> None:
    ms = [[t * 1000 for t in times] for times in (cold, warm)]
    print(
        f"{count:>7}  {statistics.median(ms[0]):>9.0f}ms  {max(ms[0]):>6.0f}ms"
        f"  {statistics.median(ms[1]):>9.0f}ms  {max(ms[1]):>6.0f}ms",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--via", choices=("agent", "hub"), default="agent")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        one_hub_run(args.one)
        return
    what = "session/new through the agent" if args.via == "agent" else "McpHub.run alone"
    print(f"{what}, {args.runs} runs each")
    header = ("servers", "cold median", "cold max", "warm median", "warm max")
    print("  ".join(f"{h:>{w}}" for h, w in zip(header, (7, 11, 8, 11, 8), strict=True)))
    if args.via == "agent":
        bench_agent(args.runs)
    else:
        bench_hub(args.runs)


if __name__ == "__main__":
    main()
