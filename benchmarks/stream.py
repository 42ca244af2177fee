"""How fast `acp-agent` relays a fast model stream to the editor, for every API family.

One agent process per family (Chat Completions, the Responses API, Anthropic's Messages
API; see `harness.py`), driven over raw JSON-RPC on its pipes the way an editor drives it:

    initialize  ->  for each kind and run: session/new  ->  session/prompt "[[deltas 20000 KIND]]"

The fake server answers with 20,000 one-word deltas ("w0 ", "w1 ", ...) as fast as it can
write them, of one of three kinds:

    text       reply text              -> agent_message_chunk
    thinking   reasoning / thinking    -> agent_thought_chunk
    tool       one tool call's arguments {"words": "w0 w1 ..."}, one word per delta -> one
               tool_call (the tool does not exist: the call fails, the model is called again
               with its result and answers a line of text)

Each run is timed from writing session/prompt to reading its answer, and to the first
session/update of the reply; the fake reports (with `--timings`) when it sent the first byte
of its answer, so "first update - fake byte" is the agent's own delay. Every run checks
that all 20,000 words arrived, in order. A new session per run keeps the requests the same
size; the first run(s) of each kind warm up the HTTP client and lazy imports, not counted.

Targets: the Responses and Anthropic paths within 1.5x of the Chat path's median, kind for
kind; the first update within 20 ms of the fake's first byte (text and thinking: a tool
call is shown once its arguments are complete).

    uv run python benchmarks/stream.py                  # 5 runs of each family and kind
    uv run python benchmarks/stream.py --families chat --kinds text --runs 10
    uv run python benchmarks/stream.py --agent-command /tmp/old/.venv/bin/acp-agent
    uv run python benchmarks/stream.py --cprofile /tmp/agent   # /tmp/agent-<family>.prof

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
from typing import Any, TextIO

from harness import FAMILIES, PATHS, FakeProcess, Fakes, agent_env, spread, write_config
from startup import (
    CONSOLE_SCRIPT,
    INITIALIZE,
    AgentProcess,
    BenchmarkError,
    _await_response,
    _machine_load,
)

KINDS = ("text", "thinking", "tool")
RATIO_TARGET = 1.5
"""Responses and Anthropic medians at most this many times the Chat path's, per kind."""
FIRST_UPDATE_TARGET_MS = 20.0
"""First update at most this long after the fake server's first byte (text, thinking)."""
DELTAS = 20_000
RUN_TIMEOUT = 120.0
DELTAS_TOOL = "deltas_args"


@dataclass
class Run:
    total: float
    """Seconds from writing session/prompt to reading its response."""
    first_update: float
    """Seconds from writing session/prompt to the first update of the reply."""
    fake_first_byte: float
    """Seconds from writing session/prompt to the fake's first byte of its answer."""
    notifications: int
    """session/update notifications received during the prompt."""
    agent_cpu: float | None
    """Agent CPU seconds (user + system, all threads) spent on the prompt."""


def expected_text(deltas: int) -> str:
    return "".join(f"w{i} " for i in range(deltas))


def measure_prompt(
    agent: AgentProcess, fake: FakeProcess, family: str, kind: str, cwd: Path, deltas: int
) -> Run:
    deadline = time.monotonic() + RUN_TIMEOUT
    new_id = agent.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    session_id = _await_response(agent, new_id, "session/new", deadline)["sessionId"]
    # session/new is followed by an available_commands_update: let it arrive first.
    _drain(agent, 0.05)

    cpu_before = agent.cpu_ms()
    started = time.monotonic()
    prompt = f"[[deltas {deltas}]]" if kind == "text" else f"[[deltas {deltas} {kind}]]"
    prompt_id = agent.request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]},
    )
    first_update: float | None = None
    notifications = 0
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    while True:
        message = agent.receive(deadline)
        if message.get("method") == "session/update":
            notifications += 1
            update = (message.get("params") or {}).get("update") or {}
            match update.get("sessionUpdate"):
                case "agent_message_chunk":
                    texts.append((update.get("content") or {}).get("text", ""))
                case "agent_thought_chunk":
                    thoughts.append((update.get("content") or {}).get("text", ""))
                case "tool_call":
                    calls.append(update)
                case _:
                    continue
            if first_update is None:
                first_update = time.monotonic() - started
        elif message.get("id") == prompt_id:
            if "error" in message:
                raise BenchmarkError(f"session/prompt failed: {message['error']}")
            break
    total = time.monotonic() - started
    cpu_after = agent.cpu_ms()

    stop = (message.get("result") or {}).get("stopReason")
    if stop != "end_turn":
        raise BenchmarkError(f"the prompt ended with {stop!r}, not end_turn")
    if first_update is None:
        raise BenchmarkError("the prompt ended without an update")
    _check(kind, "".join(texts), "".join(thoughts), calls, deltas)
    exchange = fake.exchanges(started, PATHS[family])[0]
    cpu = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) / 1000
    return Run(total, first_update, exchange["first_byte"] - started, notifications, cpu)


def _check(kind: str, text: str, thought: str, calls: list[dict[str, Any]], deltas: int) -> None:
    match kind:
        case "text":
            _check_words("reply text", text, deltas)
        case "thinking":
            _check_words("thinking", thought, deltas)
        case "tool":
            if len(calls) != 1 or calls[0].get("rawInput") is None:
                raise BenchmarkError(f"expected one tool call with its input, got {calls!r:.200}")
            words = calls[0]["rawInput"].get("words", "")
            _check_words("tool arguments", words, deltas)
            if not text.startswith("Tool result:"):
                raise BenchmarkError(f"the answer to the tool result is {text[:80]!r}")


def _check_words(what: str, received: str, deltas: int) -> None:
    expected = expected_text(deltas)
    if received == expected:
        return
    words = received.split()
    for index, word in enumerate(words):
        if word != f"w{index}":
            raise BenchmarkError(
                f"{what}: word {index} arrived as {word!r}, expected 'w{index}' "
                f"({len(words)} words received of {deltas})"
            )
    raise BenchmarkError(
        f"{what}: received {len(words)} words of {deltas} ({len(received)} characters, "
        f"expected {len(expected)})"
    )


def _drain(agent: AgentProcess, seconds: float) -> None:
    """Read whatever the agent sends within `seconds` (notifications between requests)."""
    deadline = time.monotonic() + seconds
    try:
        while True:
            agent.receive(deadline)
    except BenchmarkError as exc:
        if "timed out" not in str(exc):
            raise


# --- the report -----------------------------------------------------------------------------


def agent_command(args: argparse.Namespace, family: str) -> tuple[str, list[str]]:
    if args.agent_command is not None:
        return args.agent_command, shlex.split(args.agent_command)
    if args.cprofile is not None:
        output = f"{args.cprofile}-{family}.prof"
        command = [sys.executable, "-m", "cProfile", "-o", output, "-m", "acp_agent"]
        return "python -m cProfile -m acp_agent", command
    if CONSOLE_SCRIPT.exists():
        return str(CONSOLE_SCRIPT.relative_to(CONSOLE_SCRIPT.parents[2])), [str(CONSOLE_SCRIPT)]
    print(f"note: {CONSOLE_SCRIPT} not found; measuring `python -m acp_agent`")
    return "python -m acp_agent", [sys.executable, "-m", "acp_agent"]


Results = dict[tuple[str, str], list[Run]]


def print_report(results: Results, deltas: int) -> bool:
    """One table, a row per family and kind; True when every target is met."""
    print(
        f"\n{'family':<10}{'kind':<9}{'answered, s':>22}{'x chat':>8}"
        f"{'first update, ms':>22}{'- fake byte, ms':>20}{'updates':>9}{'agent CPU, s':>22}"
    )
    print("-" * 122)
    met = True
    for (family, kind), runs in results.items():
        totals = [r.total for r in runs]
        chat = results.get(("chat", kind))
        ratio = statistics.median(totals) / statistics.median(r.total for r in chat) if chat else 0
        late = [r.first_update - r.fake_first_byte for r in runs]
        cpu = [r.agent_cpu for r in runs if r.agent_cpu is not None]
        verdict = ""
        if family != "chat" and chat and ratio > RATIO_TARGET:
            verdict += " SLOW"
        if kind != "tool" and statistics.median(late) * 1000 > FIRST_UPDATE_TARGET_MS:
            verdict += " LATE"
        met = met and not verdict
        print(
            f"{family:<10}{kind:<9}{spread(totals):>22}{ratio:>8.2f}"
            f"{spread([r.first_update for r in runs], 1000, 1):>22}"
            f"{spread(late, 1000, 1) if kind != 'tool' else '(at the end)':>20}"
            f"{statistics.median(r.notifications for r in runs):>9g}"
            f"{spread(cpu):>22}{verdict}"
        )
    print(
        f"\n{deltas:,} deltas per run; median [min-max] over the measured runs. Targets: "
        f"Responses and Anthropic within {RATIO_TARGET:g}x of Chat (SLOW otherwise); the "
        f"first update within {FIRST_UPDATE_TARGET_MS:g} ms of the fake's first byte (LATE)."
    )
    print(f"targets: {'met' if met else 'MISSED'}")
    return met


def run_family(
    args: argparse.Namespace, fakes: Fakes, family: str, log: TextIO, workdir: Path
) -> tuple[str, Results]:
    label, command = agent_command(args, family)
    config = write_config(workdir, fakes, family)
    agent = AgentProcess(command, agent_env(config), workdir, log)
    results: Results = {}
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        init_id = agent.request("initialize", INITIALIZE)
        _await_response(agent, init_id, "initialize", deadline)
        for kind in args.kinds:
            runs = results.setdefault((family, kind), [])
            for number in range(args.warmup + args.runs):
                try:
                    run = measure_prompt(
                        agent, fakes.for_family(family), family, kind, workdir, args.deltas
                    )
                except BenchmarkError as exc:
                    raise BenchmarkError(f"{family} {kind}, run {number + 1}: {exc}") from None
                if number >= args.warmup:
                    runs.append(run)
    finally:
        agent.close()
    return label, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs (default 5)")
    parser.add_argument(
        "--warmup", type=int, default=1, help="runs before measuring, not counted (default 1)"
    )
    parser.add_argument("--deltas", type=int, default=DELTAS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--families", nargs="+", choices=FAMILIES, default=list(FAMILIES), metavar="FAMILY"
    )
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), metavar="KIND")
    parser.add_argument(
        "--cprofile",
        metavar="PREFIX",
        help="run the agent under cProfile (its main thread), writing PREFIX-<family>.prof",
    )
    parser.add_argument(
        "--agent-command",
        metavar="COMMAND",
        help="start this command instead (e.g. a patched build to compare)",
    )
    parser.add_argument(
        "--agent-log", type=Path, help="file for the agent's stderr (default: a temporary file)"
    )
    parser.add_argument("--json", action="store_true", help="also print every run as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.deltas < 1:
        parser.error("--runs and --deltas must be at least 1, --warmup at least 0")
    if "chat" not in args.families:
        print("note: without the chat family there is nothing to compare with")

    log_path = args.agent_log or Path(tempfile.gettempdir()) / "acp-agent-stream-bench.log"
    results: Results = {}
    try:
        with (
            open(log_path, "w", encoding="utf-8") as log,
            tempfile.TemporaryDirectory(prefix="acp-bench-") as workdir,
            Fakes(log) as fakes,
        ):
            for family in args.families:
                label, family_results = run_family(args, fakes, family, log, Path(workdir))
                results.update(family_results)
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc} (agent stderr: {log_path})", file=sys.stderr)
        return 2

    print(f"\nacp-agent streaming: '[[deltas {args.deltas} KIND]]' answered by the fake servers")
    print(f"agent: {label}; python {sys.version.split()[0]}, {_machine_load()}")
    print(f"{args.runs} runs per row, {args.warmup} warm-up run(s) before each, not counted")
    met = print_report(results, args.deltas)
    print(f"agent stderr: {log_path}")
    if args.cprofile is not None:
        print(f"agent profiles: {args.cprofile}-<family>.prof (python -m pstats FILE)")
    if args.json:
        print(json.dumps({f"{f}/{k}": [vars(r) for r in runs] for (f, k), runs in results.items()}))
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
