"""What a turn costs the agent itself as the conversation grows, for every API family.

For each family (see `harness.py`) one agent process loads stored sessions of 1, 100, 400
and 1,000 turns (`session/load`), then sends each a few short prompts. Each turn of the
stored history is what a coding session looks like: a prompt, a reply that reads a file
(text and a tool call), the file (about 600 characters) as the tool's result, and an
answer. The sessions are written before the agent starts, by the store of the agent under
test (its own interpreter runs `--build`), so the log format always matches.

Per prompt, from the agent's side of the wire, against the fake server's clock:

    before    session/prompt written  ->  the request body received by the fake server
    after     the fake's stream ended ->  the session/prompt answer read

`overhead` is their sum: what the agent adds to a turn besides the model's own time.
Target: at 1,000 turns of history, a median overhead under 20 ms per turn, every family.

    uv run python benchmarks/history.py                   # 1 warm-up + 5 prompts per size
    uv run python benchmarks/history.py --turns 1 400 --families chat --runs 9
    uv run python benchmarks/history.py --agent-command /tmp/old/.venv/bin/acp-agent
    uv run python benchmarks/history.py --cprofile /tmp/history   # PREFIX-<family>.prof

Standard library only (plus the project, installed in the interpreter that runs this).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from harness import FAMILIES, PATHS, FakeProcess, Fakes, agent_env, spread, write_config
from startup import CONSOLE_SCRIPT, INITIALIZE, AgentProcess, BenchmarkError, _await_response
from startup import _machine_load as machine_load

TURNS = (1, 100, 400, 1000)
TARGET_MS = 20.0
TARGET_TURNS = 1000
RUN_TIMEOUT = 120.0

# Run by the agent's own interpreter (`python - STATE CWD TURNS...` with this on stdin).
_BUILD = r"""
import sys
from pathlib import Path

from acp_agent.messages import (
    Message, MessageChunk, TextPart, ToolCallPart, ToolCallStarted, ToolCallUpdated,
    ToolResultPart,
)
from acp_agent.sessions.records import (
    EventRecord, MessageRecord, SessionHeader, TurnEndRecord, utc_now,
)
from acp_agent.sessions.store import SessionStore

state, cwd, *sizes = sys.argv[1:]
store = SessionStore(Path(state))
code = "".join(
    f"def handle_{n}(request):\n    value = request.get('key_{n}')\n    return value * {n}\n"
    for n in range(8)
)
for size in map(int, sizes):
    log = store.create(SessionHeader(f"history-{size}", cwd, created_at=utc_now()))
    for i in range(size):
        call = f"call_{size}_{i:05d}"
        path = f"src/module_{i % 50}.py"
        prompt = f"Turn {i}: look at {path} and explain what handle_{i % 8} does, then fix it."
        reply = (
            f"handle_{i % 8} reads key_{i % 8} from the request and multiplies it by {i % 8}; "
            "a missing key makes it fail with a TypeError. Guard the lookup and return a "
            "default instead, and add a test that sends a request without the key."
        )
        log.append(MessageRecord(Message("user", [TextPart(prompt)]), f"u{i}"))
        read = ToolCallPart(call, "read_file", {"path": path})
        asked = Message("assistant", [TextPart("Let me read it."), read])
        log.append(MessageRecord(asked, f"a{i}"))
        log.append(EventRecord(MessageChunk("Let me read it.", f"a{i}")))
        log.append(EventRecord(ToolCallStarted(call, f"Read {path}", "read", "completed")))
        log.append(MessageRecord(Message("tool", [ToolResultPart(call, (TextPart(code),))])))
        log.append(MessageRecord(Message("assistant", [TextPart(reply)]), f"b{i}"))
        log.append(EventRecord(MessageChunk(reply, f"b{i}")))
        log.append(TurnEndRecord("end_turn", utc_now()))
    log.close()
"""


@dataclass
class Run:
    before: float
    """Seconds from writing session/prompt to the fake server having the request body."""
    after: float
    """Seconds from the fake server ending its stream to reading the prompt's answer."""
    total: float
    """Seconds from writing session/prompt to reading its answer."""

    @property
    def overhead(self) -> float:
        return self.before + self.after


Results = dict[tuple[str, int], list[Run]]


def build_sessions(python: str, state: Path, cwd: Path, sizes: list[int], log: TextIO) -> None:
    result = subprocess.run(
        [python, "-", str(state), str(cwd), *map(str, sizes)],
        input=_BUILD,
        text=True,
        stdout=log,
        stderr=subprocess.PIPE,
        timeout=300,
    )
    if result.returncode != 0:
        raise BenchmarkError(f"building the stored sessions failed: {result.stderr[-2000:]}")


def measure_prompt(
    agent: AgentProcess, fake: FakeProcess, family: str, session_id: str, number: int
) -> Run:
    deadline = time.monotonic() + RUN_TIMEOUT
    started = time.monotonic()
    prompt_id = agent.request(
        "session/prompt",
        {
            "sessionId": session_id,
            "prompt": [{"type": "text", "text": f"Measured prompt {number}: any news?"}],
        },
    )
    while True:
        message = agent.receive(deadline)
        if message.get("id") == prompt_id and "method" not in message:
            break
    answered = time.monotonic()
    if "error" in message:
        raise BenchmarkError(f"session/prompt failed: {message['error']}")
    stop = (message.get("result") or {}).get("stopReason")
    if stop != "end_turn":
        raise BenchmarkError(f"the prompt ended with {stop!r}, not end_turn")
    exchanges = fake.exchanges(started, PATHS[family], count=1)
    exchange = exchanges[0]
    if exchange["outcome"] != "completed":
        raise BenchmarkError(f"the fake answered {exchange['status']} ({exchange['outcome']})")
    return Run(exchange["received"] - started, answered - exchange["ended"], answered - started)


def load_session(agent: AgentProcess, session_id: str, cwd: Path) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    load_id = agent.request(
        "session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
    )
    _await_response(agent, load_id, "session/load", deadline)
    # The replay and the commands update come as notifications: let them all arrive.
    try:
        while True:
            agent.receive(time.monotonic() + 0.2)
    except BenchmarkError as exc:
        if "timed out" not in str(exc):
            raise


def run_family(
    args: argparse.Namespace, fakes: Fakes, family: str, log: TextIO, workdir: Path
) -> Results:
    command = agent_command(args, family)
    config = write_config(workdir, fakes, family)
    agent = AgentProcess(command, agent_env(config), workdir, log)
    results: Results = {}
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        _await_response(agent, agent.request("initialize", INITIALIZE), "initialize", deadline)
        for size in args.turns:
            session_id = f"history-{size}"
            load_session(agent, session_id, workdir)
            runs = results.setdefault((family, size), [])
            for number in range(args.warmup + args.runs):
                try:
                    run = measure_prompt(
                        agent, fakes.for_family(family), family, session_id, number
                    )
                except BenchmarkError as exc:
                    raise BenchmarkError(f"{family}, {size} turns: {exc}") from None
                if number >= args.warmup:
                    runs.append(run)
    finally:
        agent.close()
    return results


def print_report(results: Results) -> bool:
    print(
        f"\n{'family':<10}{'turns':>6}{'overhead, ms':>24}{'before, ms':>22}{'after, ms':>22}"
        f"{'prompt, ms':>24}"
    )
    print("-" * 98)
    met = True
    for (family, size), runs in results.items():
        overhead = [r.overhead for r in runs]
        verdict = ""
        if size >= TARGET_TURNS and statistics.median(overhead) * 1000 >= TARGET_MS:
            verdict, met = " MISSED", False
        print(
            f"{family:<10}{size:>6}{spread(overhead, 1000, 1):>24}"
            f"{spread([r.before for r in runs], 1000, 1):>22}"
            f"{spread([r.after for r in runs], 1000, 1):>22}"
            f"{spread([r.total for r in runs], 1000, 1):>24}{verdict}"
        )
    measured = any(size >= TARGET_TURNS for _, size in results)
    verdict = ("met" if met else "MISSED") if measured else "not measured"
    print(
        "\nmedian [min-max] per prompt. overhead = before (prompt sent -> request body at the "
        "fake) + after (fake stream ended -> prompt answered); prompt = the whole round trip."
        f"\ntarget: overhead under {TARGET_MS:g} ms at {TARGET_TURNS:,} turns: {verdict}"
    )
    return met


def agent_command(args: argparse.Namespace, family: str) -> list[str]:
    if args.agent_command is not None:
        return shlex.split(args.agent_command)
    if args.cprofile is not None:
        output = f"{args.cprofile}-{family}.prof"
        return [sys.executable, "-m", "cProfile", "-o", output, "-m", "acp_agent"]
    if CONSOLE_SCRIPT.exists():
        return [str(CONSOLE_SCRIPT)]
    return [sys.executable, "-m", "acp_agent"]


def agent_python(args: argparse.Namespace) -> str:
    """The interpreter of the agent under test: next to its console script, if it has one."""
    if args.agent_command is not None:
        program = Path(shlex.split(args.agent_command)[0])
        if (program.parent / "python").exists():
            return str(program.parent / "python")
    return sys.executable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured prompts per size")
    parser.add_argument("--warmup", type=int, default=1, help="prompts before, not counted")
    parser.add_argument("--turns", type=int, nargs="+", default=list(TURNS), metavar="N")
    parser.add_argument(
        "--families", nargs="+", choices=FAMILIES, default=list(FAMILIES), metavar="FAMILY"
    )
    parser.add_argument("--agent-command", metavar="COMMAND", help="start this command instead")
    parser.add_argument(
        "--cprofile", metavar="PREFIX", help="run the agent under cProfile: PREFIX-<family>.prof"
    )
    parser.add_argument("--agent-log", type=Path, help="file for the agent's stderr")
    parser.add_argument("--json", action="store_true", help="also print every run as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 if the target is missed")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or min(args.turns) < 1:
        parser.error("--runs and --turns must be at least 1, --warmup at least 0")

    log_path = args.agent_log or Path(tempfile.gettempdir()) / "acp-agent-history-bench.log"
    results: Results = {}
    try:
        with (
            open(log_path, "w", encoding="utf-8") as log,
            tempfile.TemporaryDirectory(prefix="acp-bench-") as directory,
            Fakes(log) as fakes,
        ):
            workdir = Path(directory)
            build_sessions(agent_python(args), workdir / "state", workdir, args.turns, log)
            for family in args.families:
                results.update(run_family(args, fakes, family, log, workdir))
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc} (agent stderr: {log_path})", file=sys.stderr)
        return 2

    command = args.agent_command or "the project's acp-agent"
    print(f"\nacp-agent per-turn overhead over stored histories ({command})")
    print(f"python {sys.version.split()[0]}, {machine_load()}")
    print(f"{args.runs} measured prompts per size after {args.warmup} warm-up prompt(s)")
    met = print_report(results)
    print(f"agent stderr: {log_path}")
    if args.json:
        print(json.dumps({f"{f}/{n}": [vars(r) for r in runs] for (f, n), runs in results.items()}))
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
