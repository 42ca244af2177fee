"""How fast a restarted `acp-agent` brings stored sessions back, and what a loaded one costs.

Builds stored sessions in temporary state directories by writing their logs with the store's
own writer (`acp_agent.sessions.store` and `records`), as the agent writes them: each turn a
user prompt, a thought and a reply (merged chunk records), an assistant message with a tool
call (a read, an edit with its diff, or a command with its terminal), the tool's started /
in-progress / completed events, the tool result, a plan now and then, the final reply,
usage and the turn's end. Then it spawns the real agent (`.venv/bin/acp-agent`, state dir
through `XDG_STATE_HOME`) and drives it over stdio with a minimal JSON-RPC client:

- load: `session/load` of a 1,000-turn session, timed from sending the request to its
  response (every replayed `session/update` read on the way), in a fresh agent per run
  that has answered a `session/list` first (so start-up is not counted);
- list: `session/list` over 1,000 stored sessions (the first page, and with a `cwd`
  filter), several requests to one agent;
- memory: the agent's resident memory (VmRSS) before and after loading N idle sessions of
  a few dozen turns each; the delta / N is the cost of one loaded session.

Targets (issue 8): load with replay of 1,000 turns <= 1 s, list over 1,000 sessions
<= 200 ms (medians). No model is called: the sessions are only loaded and listed.

    uv run python benchmarks/sessions.py              # 5 runs each
    uv run python benchmarks/sessions.py --runs 9 --check

Standard library only (plus the project, installed in the interpreter that runs this).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio

from acp_agent.messages import (
    DiffContent,
    Location,
    Message,
    MessageChunk,
    PlanEntry,
    PlanUpdated,
    TerminalContent,
    TextPart,
    ThinkingPart,
    ThoughtChunk,
    ToolCallPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolResultPart,
)
from acp_agent.sessions.records import (
    ChoiceRecord,
    EventRecord,
    MessageRecord,
    Record,
    SessionHeader,
    TitleRecord,
    TurnEndRecord,
    UsageRecord,
    utc_now,
)
from acp_agent.sessions.store import APP_NAME, SessionStore

ROOT = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = ROOT / ".venv" / "bin" / "acp-agent"

TARGET_LOAD_S = 1.0
TARGET_LIST_S = 0.2
RUN_TIMEOUT = 60.0
PROJECT = "/home/dev/project"
API_KEY = "sk-bench-0123456789abcdef"
"""Set, so the agent runs as configured in real use (its store redacts this value); the
base URL points nowhere: no model is called."""
INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "terminal": True,
        "_meta": {"terminal_output": True},
    },
    "clientInfo": {"name": "acp-agent-sessions-benchmark", "version": "1"},
}
SCRUBBED_ENV = ("ACP_AGENT_CONFIG", "ACP_AGENT_MODEL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")

PROSE = (
    "The function reads the configuration once at start-up and caches it; the bug is that "
    "the cache key ignores the profile name, so switching profiles returns stale values. "
)
CODE = "".join(f"    line_{i} = compute(value_{i}, options)  # step {i}\n" for i in range(40))


class BenchmarkError(Exception):
    """A run that did not finish; the message says where it stopped."""


# --- the stored sessions --------------------------------------------------------------------


def turn(n: int, session: str) -> list[Record]:
    """The records one turn writes, in the order the session manager writes them."""
    user_id, reply_id, final_id = f"{session}-u{n}", f"{session}-a{n}", f"{session}-f{n}"
    call_id = f"call_{session}_{n}"
    path = f"{PROJECT}/src/module_{n % 50}.py"
    prompt = f"Turn {n}: please look at src/module_{n % 50}.py and fix the caching bug. " * 2
    thought = PROSE * 2
    reply = f"I'll look at src/module_{n % 50}.py first. " + PROSE
    final = "Done: the cache key now includes the profile name. " + PROSE
    match n % 3:
        case 0:
            name, kind, title = "read_file", "read", f"Read {path}"
            arguments: dict[str, Any] = {"path": path, "offset": 1, "limit": 40}
            shown: tuple[Any, ...] = (TextPart(f"```\n{CODE}```"),)
            result = CODE
        case 1:
            name, kind, title = "edit_file", "edit", f"Edit {path}"
            old, new = CODE[:400], CODE[:400].replace("step", "stage")
            arguments = {"path": path, "old": old, "new": new}
            shown = (DiffContent(path, old, new),)
            result = f"Edited {path}: 1 change at line 3."
        case _:
            name, kind, title = "shell", "execute", "pytest -q tests/test_config.py"
            arguments = {"command": title}
            shown = (TerminalContent(f"local-{call_id}"),)
            result = "....F.....\n1 failed, 9 passed in 0.42s\n[exit code 1]"
    records: list[Record] = [
        MessageRecord(Message("user", [TextPart(prompt)]), user_id),
        EventRecord(ThoughtChunk(thought, reply_id)),
        EventRecord(MessageChunk(reply, reply_id)),
        MessageRecord(
            Message(
                "assistant",
                [
                    ThinkingPart(thought, {"signature": "EqQBCkgIARABGAIiQ" * 12}),
                    TextPart(reply),
                    ToolCallPart(call_id, name, arguments),
                ],
            ),
            reply_id,
        ),
        EventRecord(
            ToolCallStarted(
                call_id, title, kind, raw_input=arguments, locations=(Location(path, 1),)
            )
        ),
        EventRecord(ToolCallUpdated(call_id, status="in_progress")),
        EventRecord(ToolCallUpdated(call_id, status="completed", content=shown)),
        MessageRecord(Message("tool", [ToolResultPart(call_id, (TextPart(result),))])),
    ]
    if n % 10 == 0:
        records.append(
            EventRecord(
                PlanUpdated(
                    (
                        PlanEntry("Read the module", "medium", "completed"),
                        PlanEntry("Fix the cache key", "high", "in_progress"),
                        PlanEntry("Run the tests", "low", "pending"),
                    )
                )
            )
        )
    records += [
        EventRecord(MessageChunk(final, final_id)),
        MessageRecord(Message("assistant", [TextPart(final)]), final_id),
        UsageRecord(cost_usd=0.002 * n, used=2_000 + 40 * n, estimated=False),
        TurnEndRecord("end_turn", utc_now()),
    ]
    return records


async def write_session(
    store: SessionStore, session_id: str, cwd: str, turns: int, title: str | None = None
) -> None:
    log = store.create(SessionHeader(session_id, cwd, (), utc_now()))
    try:
        log.append(ChoiceRecord(mode="ask"))
        for n in range(turns):
            for record in turn(n, session_id):
                log.append(record)
            if n == 0 and title is not None:
                log.append(TitleRecord(title))
                await log.update_summary(title=title)
        await log.update_summary()
    finally:
        log.close()


@dataclass
class StateDirs:
    load: Path
    """XDG_STATE_HOME with one long session, `long`."""
    list: Path
    """XDG_STATE_HOME with the many small sessions."""
    memory: Path
    """XDG_STATE_HOME with the sessions loaded for the memory figure."""


async def build(workdir: Path, args: argparse.Namespace) -> tuple[StateDirs, dict[str, Any]]:
    dirs = StateDirs(workdir / "load", workdir / "list", workdir / "memory")
    facts: dict[str, Any] = {}
    started = time.perf_counter()
    long_store = SessionStore(dirs.load / APP_NAME, secrets=[API_KEY])
    await write_session(long_store, "long", PROJECT, args.turns, title="Fix the caching bug")
    log_path = long_store.sessions_dir / "long.jsonl"
    facts["long_bytes"] = log_path.stat().st_size
    facts["long_records"] = sum(1 for _ in log_path.open("rb"))
    facts["long_write_s"] = time.perf_counter() - started

    started = time.perf_counter()
    many = SessionStore(dirs.list / APP_NAME, secrets=[API_KEY])
    for n in range(args.sessions):
        await write_session(
            many, f"sess_{n:05d}", f"{PROJECT}-{n % 10}", 1, title=f"Session {n}: fix the cache"
        )
    facts["list_write_s"] = time.perf_counter() - started

    idle = SessionStore(dirs.memory / APP_NAME, secrets=[API_KEY])
    for n in range(args.memory_sessions + 1):  # one more: loaded before the baseline
        await write_session(idle, f"idle_{n:04d}", PROJECT, args.memory_turns)
    facts["idle_bytes"] = (idle.sessions_dir / "idle_0000.jsonl").stat().st_size
    return dirs, facts


# --- a minimal ACP client over stdio ----------------------------------------------------------


class Agent:
    """A spawned agent speaking newline-delimited JSON-RPC on its stdin and stdout."""

    def __init__(self, state_home: Path, workdir: Path, log: TextIO) -> None:
        home = workdir / "home"
        home.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        env.update(
            HOME=str(home),
            XDG_STATE_HOME=str(state_home),
            XDG_CONFIG_HOME=str(home / ".config"),
            OPENAI_API_KEY=API_KEY,
            OPENAI_BASE_URL="http://127.0.0.1:9/v1",
            PYTHONUNBUFFERED="1",
        )
        if not CONSOLE_SCRIPT.exists():
            raise BenchmarkError(f"{CONSOLE_SCRIPT} not found: run `uv sync` first")
        self.process = subprocess.Popen(
            [str(CONSOLE_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=workdir,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self._stdout = self.process.stdout.fileno()
        self._buffer = b""
        self._next_id = 0
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        self.deadline = time.perf_counter() + RUN_TIMEOUT

    def send(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def call(self, method: str, params: dict[str, Any]) -> tuple[Any, int]:
        """The result of a request, and how many `session/update`s came before it."""
        return self.answer(self.send(method, params), method)

    def answer(self, request_id: int, what: str) -> tuple[Any, int]:
        updates = 0
        while True:
            message = self._next_message()
            if message.get("method") == "session/update":
                updates += 1
            elif "method" in message and "id" in message:  # a request to us: refuse it
                self._write(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": -32601, "message": "not supported by the benchmark"},
                    }
                )
            elif message.get("id") == request_id:
                if "error" in message:
                    raise BenchmarkError(f"{what} failed: {message['error']}")
                return message.get("result"), updates

    def rss_kib(self) -> int:
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError as exc:
            raise BenchmarkError(f"no /proc for the agent: {exc}") from None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise BenchmarkError("no VmRSS in /proc/PID/status")

    def close(self) -> None:
        """Close stdin as an editor does when it quits; kill the agent if it lingers."""
        self._selector.close()
        with contextlib.suppress(BrokenPipeError):
            self._stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def _write(self, message: dict[str, Any]) -> None:
        self._stdin.write(json.dumps(message).encode() + b"\n")
        self._stdin.flush()

    def _next_message(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            remaining = self.deadline - time.perf_counter()
            if remaining <= 0 or not self._selector.select(remaining):
                raise BenchmarkError("timed out waiting for the agent")
            chunk = os.read(self._stdout, 1 << 20)
            if not chunk:
                raise BenchmarkError(f"the agent closed stdout (exit code {self.process.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise BenchmarkError(f"the agent wrote a non-object frame: {line[:200]!r}")
        return message


def ready_agent(state_home: Path, workdir: Path, log: TextIO) -> Agent:
    """An agent that has answered `initialize` and finished loading (a `session/list`)."""
    agent = Agent(state_home, workdir, log)
    try:
        agent.call("initialize", INITIALIZE)
        agent.call("session/list", {"cwd": "/nowhere"})
    except BaseException:
        agent.close()
        raise
    return agent


def load_params(session_id: str, cwd: Path) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}


# --- the measurements -------------------------------------------------------------------------


def measure_load(dirs: StateDirs, workdir: Path, log: TextIO, runs: int) -> tuple[list[float], int]:
    """Seconds from sending `session/load` of the long session to its answer, one fresh agent
    per run; and how many updates the replay sent before the answer."""
    times, replayed = [], 0
    for _ in range(runs):
        agent = ready_agent(dirs.load, workdir, log)
        try:
            started = time.perf_counter()
            _, replayed = agent.call("session/load", load_params("long", workdir))
            times.append(time.perf_counter() - started)
        finally:
            agent.close()
    return times, replayed


def measure_list(
    dirs: StateDirs, workdir: Path, log: TextIO, runs: int
) -> tuple[list[float], list[float], int]:
    agent = ready_agent(dirs.list, workdir, log)
    try:
        first: list[float] = []
        filtered: list[float] = []
        shown = 0
        for _ in range(runs):
            started = time.perf_counter()
            result, _ = agent.call("session/list", {})
            first.append(time.perf_counter() - started)
            shown = len(result["sessions"])
            started = time.perf_counter()
            agent.call("session/list", {"cwd": f"{PROJECT}-3"})
            filtered.append(time.perf_counter() - started)
        return first, filtered, shown
    finally:
        agent.close()


def measure_memory(dirs: StateDirs, workdir: Path, log: TextIO, sessions: int) -> tuple[int, int]:
    """RSS (KiB) with one session loaded (code paths warm), then after N more."""
    agent = ready_agent(dirs.memory, workdir, log)
    try:
        agent.call("session/load", load_params("idle_0000", workdir))
        before = agent.rss_kib()
        for n in range(1, sessions + 1):
            agent.call("session/load", load_params(f"idle_{n:04d}", workdir))
        after = agent.rss_kib()
        return before, after
    finally:
        agent.close()


# --- the report -------------------------------------------------------------------------------


def report(name: str, times: list[float], target: float | None) -> bool:
    median = statistics.median(times)
    verdict = "" if target is None else ("  ok" if median <= target else "  MISSED")
    limit = "" if target is None else f"  (target <= {target * 1000:g} ms)"
    print(
        f"  {name:<40} median {median * 1000:8.1f} ms   min {min(times) * 1000:8.1f}   "
        f"max {max(times) * 1000:8.1f}{limit}{verdict}"
    )
    return target is None or median <= target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs (default 5)")
    parser.add_argument("--turns", type=int, default=1_000, help="turns of the loaded session")
    parser.add_argument("--sessions", type=int, default=1_000, help="stored sessions listed")
    parser.add_argument(
        "--memory-sessions", type=int, default=100, help="sessions loaded for the memory figure"
    )
    parser.add_argument("--memory-turns", type=int, default=20, help="turns of each of those")
    parser.add_argument("--agent-log", type=Path, help="file for the agents' stderr")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.memory_sessions < 1:
        parser.error("--runs and --memory-sessions must be at least 1")

    log_path = args.agent_log or Path(tempfile.gettempdir()) / "acp-agent-sessions-bench.log"
    try:
        with (
            open(log_path, "w", encoding="utf-8") as log,
            tempfile.TemporaryDirectory(prefix="acp-sessions-bench-") as tmp,
        ):
            workdir = Path(tmp)
            dirs, facts = anyio.run(build, workdir, args)
            load_times, replayed = measure_load(dirs, workdir, log, args.runs)
            list_first, list_filtered, shown = measure_list(dirs, workdir, log, args.runs)
            before, after = measure_memory(dirs, workdir, log, args.memory_sessions)
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc} (agent stderr: {log_path})", file=sys.stderr)
        return 2

    print(f"acp-agent sessions, {CONSOLE_SCRIPT.relative_to(ROOT)}; python "
          f"{sys.version.split()[0]}, {_machine_load()}")  # fmt: skip
    print(
        f"long session: {args.turns} turns, {facts['long_records']} records, "
        f"{facts['long_bytes'] / 1e6:.1f} MB; its load replays {replayed} session/update"
    )
    print(f"list: {args.sessions} stored sessions; the first page shows {shown}")
    print(f"{args.runs} runs (load: a fresh agent per run, answered a session/list first)")
    met = [
        report(f"session/load, {args.turns}-turn replay", load_times, TARGET_LOAD_S),
        report(f"session/list of {args.sessions} (first page)", list_first, TARGET_LIST_S),
        report(f"session/list of {args.sessions}, cwd filter", list_filtered, TARGET_LIST_S),
    ]
    per_session = (after - before) / args.memory_sessions
    print(
        f"  memory per idle loaded session          {per_session:8.0f} KiB   "
        f"(RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB after loading "
        f"{args.memory_sessions} sessions of {args.memory_turns} turns, "
        f"{facts['idle_bytes'] / 1024:.0f} KiB of log each)"
    )
    print(f"targets: {'met' if all(met) else 'MISSED'}; agent stderr: {log_path}")
    return 1 if args.check and not all(met) else 0


def _machine_load() -> str:
    cpus = os.cpu_count() or 0
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return f"{cpus} CPUs"
    return f"{cpus} CPUs, load average {one:.2f} (1 min) {five:.2f} (5 min)"


if __name__ == "__main__":
    sys.exit(main())
