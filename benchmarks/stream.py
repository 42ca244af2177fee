"""How fast `acp-agent` relays a fast model stream to the editor.

One agent process, driven over raw JSON-RPC on its pipes the way an editor drives it:

    initialize  ->  for each run: session/new  ->  session/prompt "[[deltas 20000]]"

The fake OpenAI-compatible server `tests/fake_llm.py` answers that prompt with 20,000
one-word deltas ("w0 ", "w1 ", ...) as fast as it can write them. Each run is timed from
writing session/prompt to reading its response; the time to the first agent_message_chunk
is reported too, with the number of session/update notifications (and of message chunks)
the agent sent for those 20,000 deltas. Every run checks that all 20,000 words arrived, in
order, in the agent_message_chunk text. A new session per run keeps the requests the same
size; the first run(s) warm up the HTTP client and lazy imports and are not counted.

    uv run python benchmarks/stream.py                  # 5 runs, .venv/bin/acp-agent
    uv run python benchmarks/stream.py --runs 10 --check
    uv run python benchmarks/stream.py --cprofile /tmp/agent.prof   # profile the agent

Standard library only (plus the project, installed in the interpreter that runs this).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from startup import (
    CONSOLE_SCRIPT,
    FAKE_LLM,
    INITIALIZE,
    AgentProcess,
    BenchmarkError,
    FakeLLM,
    _await_response,
    _machine_load,
    agent_env,
)

TARGET_SECONDS = 0.8
"""Median, prompt sent to prompt answered. Peers: mistral-vibe 0.97 s, codex-acp 1.10 s,
claude-agent-acp 1.34 s."""
DELTAS = 20_000
RUN_TIMEOUT = 60.0


@dataclass
class Run:
    total: float
    """Seconds from writing session/prompt to reading its response."""
    first_chunk: float
    """Seconds from writing session/prompt to the first agent_message_chunk."""
    notifications: int
    """session/update notifications received during the prompt."""
    chunks: int
    """... of which agent_message_chunk."""
    agent_cpu: float | None
    """Agent CPU seconds (user + system, all threads) spent on the prompt."""


def expected_text(deltas: int) -> str:
    return "".join(f"w{i} " for i in range(deltas))


def measure_prompt(agent: AgentProcess, cwd: Path, deltas: int) -> Run:
    deadline = time.perf_counter() + RUN_TIMEOUT
    new_id = agent.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    session_id = _await_response(agent, new_id, "session/new", deadline)["sessionId"]
    # session/new is followed by an available_commands_update: let it arrive first.
    _drain(agent, 0.05)

    cpu_before = agent.cpu_ms()
    started = time.perf_counter()
    prompt_id = agent.request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": f"[[deltas {deltas}]]"}]},
    )
    first_chunk: float | None = None
    notifications = 0
    texts: list[str] = []
    while True:
        message = agent.receive(deadline)
        if message.get("method") == "session/update":
            notifications += 1
            params = message.get("params") or {}
            update = params.get("update") or {}
            if update.get("sessionUpdate") == "agent_message_chunk":
                if first_chunk is None:
                    first_chunk = time.perf_counter() - started
                texts.append((update.get("content") or {}).get("text", ""))
        elif message.get("id") == prompt_id:
            if "error" in message:
                raise BenchmarkError(f"session/prompt failed: {message['error']}")
            break
    total = time.perf_counter() - started
    cpu_after = agent.cpu_ms()

    stop = (message.get("result") or {}).get("stopReason")
    if stop != "end_turn":
        raise BenchmarkError(f"the prompt ended with {stop!r}, not end_turn")
    if first_chunk is None:
        raise BenchmarkError("the prompt ended without an agent_message_chunk")
    _check_text("".join(texts), deltas)
    cpu = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) / 1000
    return Run(total, first_chunk, notifications, len(texts), cpu)


def _check_text(received: str, deltas: int) -> None:
    expected = expected_text(deltas)
    if received == expected:
        return
    words = received.split()
    for index, word in enumerate(words):
        if word != f"w{index}":
            raise BenchmarkError(
                f"word {index} arrived as {word!r}, expected 'w{index}' "
                f"({len(words)} words received of {deltas})"
            )
    raise BenchmarkError(
        f"received {len(words)} words of {deltas} ({len(received)} characters, "
        f"expected {len(expected)})"
    )


def _drain(agent: AgentProcess, seconds: float) -> None:
    """Read whatever the agent sends within `seconds` (notifications between requests)."""
    deadline = time.perf_counter() + seconds
    try:
        while True:
            agent.receive(deadline)
    except BenchmarkError as exc:
        if "timed out" not in str(exc):
            raise


# --- the report -----------------------------------------------------------------------------


def agent_command(args: argparse.Namespace) -> tuple[str, list[str]]:
    if args.agent_command is not None:
        return args.agent_command, shlex.split(args.agent_command)
    if args.cprofile is not None:
        command = [sys.executable, "-m", "cProfile", "-o", str(args.cprofile), "-m", "acp_agent"]
        return "python -m cProfile -m acp_agent", command
    if args.via == "script" and CONSOLE_SCRIPT.exists():
        return str(CONSOLE_SCRIPT.relative_to(CONSOLE_SCRIPT.parents[2])), [str(CONSOLE_SCRIPT)]
    if args.via == "script":
        print(f"note: {CONSOLE_SCRIPT} not found; measuring `python -m acp_agent`")
    return "python -m acp_agent", [sys.executable, "-m", "acp_agent"]


def print_report(label: str, runs: list[Run], warmup: list[Run], deltas: int) -> bool:
    print(f"\n{label}: {len(runs)} runs, {deltas:,} deltas each (all arrived in order)")
    header = f"  {'seconds from session/prompt':<30}{'median':>9}{'min':>9}{'max':>9}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    rows = [
        ("prompt answered", [r.total for r in runs]),
        ("first chunk", [r.first_chunk for r in runs]),
    ]
    cpu = [r.agent_cpu for r in runs if r.agent_cpu is not None]
    if cpu:
        rows.append(("agent CPU (user + system)", cpu))
    for name, values in rows:
        print(
            f"  {name:<30}{statistics.median(values):>9.3f}{min(values):>9.3f}{max(values):>9.3f}"
        )
    notifications = [r.notifications for r in runs]
    chunks = [r.chunks for r in runs]
    print(
        f"  session/update notifications  median {statistics.median(notifications):g} "
        f"(min {min(notifications)}, max {max(notifications)}); "
        f"agent_message_chunk median {statistics.median(chunks):g} "
        f"(min {min(chunks)}, max {max(chunks)})"
    )
    for number, run in enumerate(warmup, 1):
        print(
            f"  warm-up run {number} (not counted): answered in {run.total:.3f} s, "
            f"first chunk {run.first_chunk:.3f} s, {run.notifications} notifications"
        )
    median = statistics.median(r.total for r in runs)
    met = median <= TARGET_SECONDS
    print(
        f"\ntarget: median <= {TARGET_SECONDS:g} s end to end: {median:.3f} s, "
        f"{'met' if met else 'MISSED'} (peers: mistral-vibe 0.97 s, codex-acp 1.10 s, "
        "claude-agent-acp 1.34 s)"
    )
    return met


def run_all(
    args: argparse.Namespace, log: TextIO, workdir: Path
) -> tuple[str, list[Run], list[Run]]:
    fake = FakeLLM(args.fake_llm, log)
    try:
        label, command = agent_command(args)
        agent = AgentProcess(command, agent_env(fake.base_url), workdir, log)
        try:
            deadline = agent.started + RUN_TIMEOUT
            init_id = agent.request("initialize", INITIALIZE)
            _await_response(agent, init_id, "initialize", deadline)
            measured: list[Run] = []
            warmup: list[Run] = []
            for number in range(args.warmup + args.runs):
                try:
                    run = measure_prompt(agent, workdir, args.deltas)
                except BenchmarkError as exc:
                    raise BenchmarkError(f"run {number + 1}: {exc}") from None
                (warmup if number < args.warmup else measured).append(run)
        finally:
            agent.close()
        return label, measured, warmup
    finally:
        fake.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs (default 5)")
    parser.add_argument(
        "--warmup", type=int, default=1, help="runs before measuring, not counted (default 1)"
    )
    parser.add_argument("--deltas", type=int, default=DELTAS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--via",
        choices=("script", "module"),
        default="script",
        help="start .venv/bin/acp-agent (the default) or python -m acp_agent",
    )
    parser.add_argument(
        "--cprofile",
        type=Path,
        metavar="FILE",
        help="run the agent under cProfile (its main thread), writing the stats to FILE",
    )
    parser.add_argument(
        "--agent-command",
        metavar="COMMAND",
        help="start this command instead (e.g. a patched build to compare); overrides --via",
    )
    parser.add_argument(
        "--agent-log", type=Path, help="file for the agent's stderr (default: a temporary file)"
    )
    parser.add_argument("--fake-llm", type=Path, default=FAKE_LLM, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="also print every run as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 if the target is missed")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.deltas < 1:
        parser.error("--runs and --deltas must be at least 1, --warmup at least 0")

    log_path = args.agent_log or Path(tempfile.gettempdir()) / "acp-agent-stream-bench.log"
    try:
        with (
            open(log_path, "w", encoding="utf-8") as log,
            tempfile.TemporaryDirectory(prefix="acp-bench-") as workdir,
        ):
            label, runs, warmup = run_all(args, log, Path(workdir))
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc} (agent stderr: {log_path})", file=sys.stderr)
        return 2

    print(f"\nacp-agent streaming: prompt '[[deltas {args.deltas}]]' answered by fake_llm.py")
    print(f"python {sys.version.split()[0]}, {_machine_load()}")
    met = print_report(label, runs, warmup, args.deltas)
    print(f"agent stderr: {log_path}")
    if args.cprofile is not None:
        print(f"agent profile: {args.cprofile} (python -m pstats {args.cprofile})")
    if args.json:
        print(json.dumps({"runs": [vars(r) for r in runs], "warmup": [vars(r) for r in warmup]}))
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
