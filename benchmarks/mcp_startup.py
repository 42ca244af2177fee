"""How long a session's MCP servers take to connect: 0, 1 and 5 stdio servers.

Each run is a fresh Python process that builds an `McpHub` for N copies of the test server
`tests/mcp_servers/everything.py` (a real SDK server, spawned as a subprocess) and times
`run` until it reports started: every server connected (spawned, `initialize`, tools and
prompts listed), in parallel. Two figures per run:

- cold: the first hub in the process, which pays for importing the `mcp` SDK;
- warm: a second hub in the same process (what every later session/new pays).

Reported: the median and max over the runs, in milliseconds. Once the hub is wired into
`session/new`, this measures that request with 0, 1 and 5 servers.

    uv run python benchmarks/mcp_startup.py            # 5 runs each
    uv run python benchmarks/mcp_startup.py --runs 9
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "mcp_servers" / "everything.py"
COUNTS = (0, 1, 5)


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


def one_run(count: int) -> None:
    """In a fresh process: print {"cold": s, "warm": s} for `count` servers."""
    import anyio

    with tempfile.TemporaryDirectory() as cwd:
        cold = anyio.run(_time_hub, count, Path(cwd))
        warm = anyio.run(_time_hub, count, Path(cwd))
    print(json.dumps({"cold": cold, "warm": warm}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        one_run(args.one)
        return
    header = ("servers", "cold median", "cold max", "warm median", "warm max")
    print("  ".join(f"{h:>{w}}" for h, w in zip(header, (7, 11, 8, 11, 8), strict=True)))
    for count in COUNTS:
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(args.runs):
            done = subprocess.run(
                [sys.executable, __file__, "--one", str(count)],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            cold.append(figures["cold"] * 1000)
            warm.append(figures["warm"] * 1000)
        print(
            f"{count:>7}  {statistics.median(cold):>9.0f}ms  {max(cold):>6.0f}ms"
            f"  {statistics.median(warm):>9.0f}ms  {max(warm):>6.0f}ms"
        )


if __name__ == "__main__":
    main()
