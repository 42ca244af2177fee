"""How fast a freshly started `acp-agent` answers an editor.

Each run spawns a new agent process and drives it the way an editor does, sending every
request the moment the previous answer arrives:

    initialize  ->  session/new  ->  session/prompt "Say hello"  ->  first agent_message_chunk

The prompt is answered by the local fake OpenAI-compatible server `tests/fake_llm.py`
(`OPENAI_API_KEY=bench-key`, `OPENAI_BASE_URL=<fake>`), so no network is used. Reported per
milestone: median, min and max of the time from spawn, over the measured runs, against the
targets (initialize <= 40 ms, session/new <= 0.15 s, first chunk <= 0.3 s: what the Rust
codex-acp reaches); the resident memory (VmRSS) of the agent's process tree right after
`initialize` answered (target <= 45 MiB); the 15 slowest of the imports one run makes to
the prompt's answer, made again in one thread under `python -X importtime` (times taken in
the run itself mix its threads), with a budget line naming any vendor SDK that was loaded;
`acp-agent run "hi"` end to end (spawn to exit); and the floor under the
targets: a bare `python -c` with the event loop's imports, then with pydantic and one model
(what the config's validation needs), spawn to exit, and what that leaves of the
session/new target for the agent's own code.

    uv run python benchmarks/startup.py               # 10 runs of .venv/bin/acp-agent
    uv run python benchmarks/startup.py --via both    # the console script and `python -m`
    uv run python benchmarks/startup.py --check       # exit 1 if a target is missed
    uv run python benchmarks/startup.py --via uvx     # the built wheel through `uvx --from`
    uv run python benchmarks/startup.py --memory      # resident memory per provider path

`--memory` measures memory instead, per API family (Chat Completions, the Responses API,
Anthropic; the fakes and config of `harness.py`): a fresh agent per run, its VmRSS after
`initialize`, after a first session answered one prompt (the provider loaded), and after
20 such sessions, left idle; the growth per idle session is the difference over the 19
later sessions (target: at most 1 MiB each).

Standard library only (plus the project, installed in the interpreter that runs this).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness import (
    FAMILIES,
    ROOT,
    SCRUBBED_ENV,
    BenchmarkError,
    Fakes,
    read_line,
    write_config,
)
from harness import agent_env as config_env

FAKE_LLM = ROOT / "tests" / "fake_llm.py"
CONSOLE_SCRIPT = ROOT / ".venv" / "bin" / "acp-agent"

TARGETS_MS = {"initialize": 40.0, "session/new": 150.0, "first chunk": 300.0}
RSS_TARGET_MIB = 45.0
"""The process tree's resident memory right after `initialize`."""
IMPORT_BUDGET_MS = 100.0
"""All imports of a run to the prompt's answer, as `-X importtime` counts them (self times)."""
VENDOR_MODULES = ("openai", "anthropic", "mcp", "boto3", "botocore", "google")
"""What an OpenAI-compatible session must not import."""
IMPORT_TOP = 15
FLOOR_STEPS = (
    ("the interpreter", "pass"),
    ("+ asyncio and anyio (the event loop)", "import asyncio, anyio"),
    (
        "+ pydantic and one model (the config's validation)",
        "import asyncio, anyio, pydantic\nclass Config(pydantic.BaseModel):\n    model: str",
    ),
)
"""What every start of a Python agent like ours pays before its own code, each timed from
spawn to exit: the floor under the session/new and first-chunk targets."""
MEMORY_SESSIONS = 20
MEMORY_GROWTH_TARGET_MIB = 1.0
"""At most this much more resident memory per idle session."""
"""Median targets: an editor shows the agent as ready, and the first words of a reply."""

RUN_TIMEOUT = 30.0
PROMPT = "Say hello"
INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "terminal": True,
    },
    "clientInfo": {"name": "acp-agent-startup-benchmark", "version": "1"},
}


@dataclass
class Run:
    initialize: float
    session_new: float
    first_chunk: float
    prompt_done: float
    rss_kib: int | None
    cpu_ms: float | None
    """CPU time (user + system, all threads) the agent had used at the first chunk."""


@dataclass
class Series:
    label: str
    command: list[str]
    runs: list[Run] = field(default_factory=list)
    run_hi_ms: list[float] = field(default_factory=list)
    """`<command> run "hi"`: spawn to exit."""


@dataclass
class ImportProfile:
    modules: list[tuple[str, int, int]]
    """(name, self µs, cumulative µs) of every import, as `-X importtime` printed them."""
    top_level: list[tuple[str, int]]
    """(name, cumulative µs) of the imports nothing else imported, slowest first."""
    roots: list[str]
    """The same names in the order their imports finished."""

    def total_ms(self) -> float:
        return sum(own for _, own, _ in self.modules) / 1000

    def vendors(self) -> list[str]:
        names = {name for name, _, _ in self.modules}
        return [
            v for v in VENDOR_MODULES if v in names or any(n.startswith(v + ".") for n in names)
        ]


# --- the fake LLM ---------------------------------------------------------------------------


class FakeLLM:
    """`python tests/fake_llm.py --port 0`, whose first stdout line is its base URL."""

    def __init__(self, script: Path, log: TextIO) -> None:
        if not script.is_file():
            raise BenchmarkError(f"{script} not found (the fake OpenAI-compatible server)")
        self.process = subprocess.Popen(
            [sys.executable, str(script), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        assert self.process.stdout is not None
        line = read_line(self.process.stdout, timeout=15.0)
        if not line.startswith("http"):
            self.close()
            raise BenchmarkError(f"{script} printed {line!r} instead of its base URL")
        self.base_url = line.strip()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


# --- one agent run --------------------------------------------------------------------------


class AgentProcess:
    """A spawned agent with newline-delimited JSON-RPC on its stdin and stdout."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, log: TextIO) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=cwd,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self._stdout = self.process.stdout.fileno()
        self._buffer = b""
        self._next_id = 0
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def request(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def _send(self, message: dict[str, Any]) -> None:
        self._stdin.write(json.dumps(message).encode() + b"\n")
        self._stdin.flush()

    def receive(self, deadline: float) -> dict[str, Any]:
        """The next message from the agent; requests to the client are refused on the way."""
        while True:
            message = self._next_message(deadline)
            if "method" in message and "id" in message:
                self._send(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": -32601, "message": "not supported by the benchmark"},
                    }
                )
                continue
            return message

    def _next_message(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or not self._selector.select(remaining):
                raise BenchmarkError("timed out waiting for the agent")
            chunk = os.read(self._stdout, 65536)
            if not chunk:
                raise BenchmarkError(f"the agent closed stdout (exit code {self.process.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        if not line.strip():
            return self._next_message(deadline)
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            raise BenchmarkError(f"the agent wrote a non-JSON line: {line[:200]!r}") from None
        if not isinstance(message, dict):
            raise BenchmarkError(f"the agent wrote a non-object frame: {line[:200]!r}")
        return message

    def rss_kib(self) -> int | None:
        """VmRSS of the agent and every process under it (MCP servers, shells)."""
        return tree_rss_kib(self.process.pid)

    def cpu_ms(self) -> float | None:
        """User + system CPU time so far: less sensitive to a busy machine than wall time."""
        try:
            stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
        return (utime + stime) * 1000 / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        """Close stdin as an editor does when it quits; kill the agent if it lingers."""
        self._selector.close()
        with contextlib.suppress(BrokenPipeError):
            self._stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def tree_rss_kib(root: int) -> int | None:
    """The VmRSS of `root` and its descendants, from /proc; None without /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry.name))
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        rss = _vm_rss_kib(pid)
        if rss is None and pid == root:
            return None
        total += rss or 0
        pending.extend(children.get(pid, ()))
    return total


def _vm_rss_kib(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0  # a zombie: no memory left


def _await_response(agent: AgentProcess, request_id: int, what: str, deadline: float) -> Any:
    while True:
        message = agent.receive(deadline)
        if message.get("id") != request_id or "method" in message:
            continue
        if "error" in message:
            raise BenchmarkError(f"{what} failed: {message['error']}")
        return message.get("result")


def measure_once(command: list[str], env: dict[str, str], cwd: Path, log: TextIO) -> Run:
    agent = AgentProcess(command, env, cwd, log)
    deadline = agent.started + RUN_TIMEOUT
    try:
        init_id = agent.request("initialize", INITIALIZE)
        _await_response(agent, init_id, "initialize", deadline)
        initialize = agent.elapsed_ms()
        rss = agent.rss_kib()

        new_id = agent.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        session = _await_response(agent, new_id, "session/new", deadline)
        session_new = agent.elapsed_ms()

        prompt_id = agent.request(
            "session/prompt",
            {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": PROMPT}]},
        )
        first_chunk: float | None = None
        cpu: float | None = None
        while True:
            message = agent.receive(deadline)
            if message.get("method") == "session/update":
                update = (message.get("params") or {}).get("update") or {}
                if first_chunk is None and update.get("sessionUpdate") == "agent_message_chunk":
                    first_chunk = agent.elapsed_ms()
                    cpu = agent.cpu_ms()
            elif message.get("id") == prompt_id:
                if "error" in message:
                    raise BenchmarkError(f"session/prompt failed: {message['error']}")
                break
        prompt_done = agent.elapsed_ms()
        if first_chunk is None:
            stop = (message.get("result") or {}).get("stopReason")
            raise BenchmarkError(f"the prompt ended ({stop}) without an agent_message_chunk")
        return Run(initialize, session_new, first_chunk, prompt_done, rss, cpu)
    finally:
        agent.close()


# --- the report -----------------------------------------------------------------------------


def agent_commands(via: str, workdir: Path | None = None) -> list[tuple[str, list[str]]]:
    if via == "uvx":
        wheel = build_wheel(workdir or Path(tempfile.mkdtemp(prefix="acp-bench-")))
        # The CPU and RSS columns are then uvx's own process, which waits for the agent.
        label = f"uvx --from {wheel.name} acp-agent (CPU, RSS: uvx's)"
        return [(label, ["uvx", "--from", str(wheel), "acp-agent"])]
    module = ("python -m acp_agent", [sys.executable, "-m", "acp_agent"])
    script = (f"{CONSOLE_SCRIPT.relative_to(ROOT)}", [str(CONSOLE_SCRIPT)])
    if via == "module":
        return [module]
    if not CONSOLE_SCRIPT.exists():
        if via == "script":
            raise BenchmarkError(f"{CONSOLE_SCRIPT} not found: run `uv sync` first")
        print(f"note: {CONSOLE_SCRIPT} not found; measuring `python -m acp_agent` only")
        return [module]
    return [script] if via == "script" else [script, module]


def build_wheel(workdir: Path) -> Path:
    """The project's wheel, built now: what `uvx acp-llm-agent` would run once released.

    uvx installs it (its dependencies from the registry) on the first, warm-up run and
    reuses its cached environment after that, as it does for an editor's every start."""
    out = workdir / "dist"
    try:
        subprocess.run(
            ["uv", "build", "--wheel", "--out-dir", str(out)],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise BenchmarkError(f"cannot build the wheel with uv: {detail}") from None
    wheels = sorted(out.glob("*.whl"))
    if not wheels:
        raise BenchmarkError(f"uv build wrote no wheel to {out}")
    return wheels[-1]


def agent_env(base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.update(OPENAI_API_KEY="bench-key", OPENAI_BASE_URL=base_url, PYTHONUNBUFFERED="1")
    return env


def print_report(series: Series) -> bool:
    """The table for one command; True when every target is met."""
    runs = series.runs
    print(f"\n{series.label}  ({len(runs)} runs; command: {' '.join(series.command)})")
    header = f"  {'milestone (ms from spawn)':<28}{'median':>9}{'min':>9}{'max':>9}   target"
    print(header)
    print("  " + "-" * (len(header) - 2))
    met = True
    rows = [
        ("initialize", [r.initialize for r in runs]),
        ("session/new", [r.session_new for r in runs]),
        ("first chunk", [r.first_chunk for r in runs]),
        ("prompt answered", [r.prompt_done for r in runs]),
    ]
    for name, values in rows:
        median = statistics.median(values)
        target = TARGETS_MS.get(name)
        verdict = ""
        if target is not None:
            ok = median <= target
            met = met and ok
            verdict = f"median <= {target:g} ms  {'ok' if ok else 'MISSED'}"
        print(f"  {name:<28}{median:>9.1f}{min(values):>9.1f}{max(values):>9.1f}   {verdict}")
    cpu = [r.cpu_ms for r in runs if r.cpu_ms is not None]
    if cpu:
        print(
            f"  {'agent CPU at first chunk':<28}{statistics.median(cpu):>9.1f}"
            f"{min(cpu):>9.1f}{max(cpu):>9.1f}   (ms of CPU, not wall time)"
        )
    if series.run_hi_ms:
        hi, label = series.run_hi_ms, 'run "hi" (spawn to exit)'
        print(f"  {label:<28}{statistics.median(hi):>9.1f}{min(hi):>9.1f}{max(hi):>9.1f}")
    rss = [r.rss_kib / 1024 for r in runs if r.rss_kib is not None]
    if rss:
        ok = statistics.median(rss) <= RSS_TARGET_MIB
        met = met and ok
        print(
            f"  {'RSS after initialize (MiB)':<28}{statistics.median(rss):>9.1f}"
            f"{min(rss):>9.1f}{max(rss):>9.1f}   "
            f"median <= {RSS_TARGET_MIB:g} MiB  {'ok' if ok else 'MISSED'} (process tree)"
        )
    else:
        print("  RSS after initialize: n/a (no /proc on this system)")
    return met


def print_imports(profile: ImportProfile) -> bool:
    """The slowest top-level imports of one run and the budget line; True within budget."""
    print(
        f"\nthe imports of one run to the prompt's answer, made again in one thread "
        f"(`-X importtime`): top {IMPORT_TOP}"
    )
    for name, cumulative in profile.top_level[:IMPORT_TOP]:
        print(f"  {cumulative / 1000:>9.1f} ms  {name}")
    total, vendors = profile.total_ms(), profile.vendors()
    ok = total <= IMPORT_BUDGET_MS and not vendors
    print(
        f"  budget: {len(profile.modules)} modules, {total:.1f} ms of imports (self times; "
        f"budget {IMPORT_BUDGET_MS:g} ms); vendor SDKs loaded: {', '.join(vendors) or 'none'}"
        f"  {'ok' if ok else 'MISSED'}"
    )
    return ok


def measure_floor(runs: int) -> list[tuple[str, float]]:
    """(step, median ms from spawn to exit) of each `FLOOR_STEPS` program, `runs` times."""
    floor = []
    for step, program in FLOOR_STEPS:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", program], check=True)
            times.append((time.perf_counter() - started) * 1000)
        floor.append((step, statistics.median(times)))
    return floor


def print_floor(floor: list[tuple[str, float]]) -> None:
    print("\nthe floor under the targets (spawn to exit of a bare `python -c`, median):")
    for step, median in floor:
        print(f"  {median:>9.1f} ms  {step}")
    left = TARGETS_MS["session/new"] - floor[-1][1]
    print(f"  left of the session/new target for the agent's own imports and work: {left:.1f} ms")


def parse_importtime(text: str) -> ImportProfile:
    modules: list[tuple[str, int, int]] = []
    top_level: list[tuple[str, int]] = []
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|", 2)
        modules.append((name.strip(), int(own), int(cumulative)))
        if not name.startswith("  "):  # one space after the bar: nothing imported it
            top_level.append((name.strip(), int(cumulative)))
    roots = [name for name, _ in top_level]
    top_level.sort(key=lambda entry: entry[1], reverse=True)
    return ImportProfile(modules, top_level, roots)


def measure_imports(env: dict[str, str], cwd: Path) -> ImportProfile:
    """What one run of `python -X importtime -m acp_agent` imports, and what those imports
    cost when a fresh interpreter makes them again in one thread, in the run's order.

    The run's own times are not costs: worker threads import beside the event loop, and a
    time measured across a switch of threads counts the other thread's work too (a module's
    self time then comes out inflated, or negative for its parent)."""
    command = [sys.executable, "-X", "importtime", "-m", "acp_agent"]
    with tempfile.TemporaryFile("w+", encoding="utf-8") as stderr:
        measure_once(command, env, cwd, stderr)
        stderr.seek(0)
        run = parse_importtime(stderr.read())
    # What nothing else imported, in the order it finished: each brings its own imports.
    roots = [name for name in run.roots if "__main__" not in name]
    replay = "\n".join(f"import {name}" for name in roots)  # statements: each has its line
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", replay],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=RUN_TIMEOUT,
    )
    if done.returncode != 0:
        raise BenchmarkError(f"importing the run's modules again failed:\n{done.stderr[-2000:]}")
    return parse_importtime(done.stderr)


def measure_run_hi(command: list[str], env: dict[str, str], cwd: Path, log: TextIO) -> float:
    """`<command> run "hi"`, spawn to exit, in ms."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [*command, "run", "hi"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
            cwd=cwd,
            timeout=RUN_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise BenchmarkError(f"run 'hi' did not end within {RUN_TIMEOUT:g}s") from None
    if done.returncode != 0:
        raise BenchmarkError(f"run 'hi' exited with {done.returncode}")
    return (time.perf_counter() - started) * 1000


# --- memory per provider path ---------------------------------------------------------------


@dataclass
class MemoryRun:
    initialize_kib: int
    first_session_kib: int
    """After the first session answered its prompt: the provider's SDK is loaded."""
    sessions_kib: int
    """After `MEMORY_SESSIONS` sessions, each of which answered one prompt."""

    def per_session_mib(self, sessions: int) -> float:
        return (self.sessions_kib - self.first_session_kib) / 1024 / (sessions - 1)


def measure_memory(
    command: list[str], env: dict[str, str], cwd: Path, log: TextIO, sessions: int
) -> MemoryRun:
    agent = AgentProcess(command, env, cwd, log)
    deadline = agent.started + RUN_TIMEOUT * 4
    try:
        _await_response(agent, agent.request("initialize", INITIALIZE), "initialize", deadline)
        initialize = _settled_rss(agent)
        first = 0
        for number in range(sessions):
            new_id = agent.request("session/new", {"cwd": str(cwd), "mcpServers": []})
            session = _await_response(agent, new_id, "session/new", deadline)
            prompt = {"type": "text", "text": f"{PROMPT} ({number})"}
            prompt_id = agent.request(
                "session/prompt", {"sessionId": session["sessionId"], "prompt": [prompt]}
            )
            _await_response(agent, prompt_id, "session/prompt", deadline)
            if number == 0:
                first = _settled_rss(agent)
        return MemoryRun(initialize, first, _settled_rss(agent))
    finally:
        agent.close()


def _settled_rss(agent: AgentProcess) -> int:
    """VmRSS once the agent has sent what it had to send (notifications after an answer)."""
    try:
        while True:
            agent.receive(time.perf_counter() + 0.2)
    except BenchmarkError as exc:
        if "timed out" not in str(exc):
            raise
    rss = agent.rss_kib()
    if rss is None:
        raise BenchmarkError("no /proc/<pid>/status on this system: memory is not measured")
    return rss


def run_memory(args: argparse.Namespace, log: TextIO, workdir: Path) -> dict[str, list[MemoryRun]]:
    command = (
        shlex.split(args.agent_command) if args.agent_command else agent_commands(args.via)[0][1]
    )
    results: dict[str, list[MemoryRun]] = {}
    with Fakes(log) as fakes:
        for family in FAMILIES:
            env = config_env(write_config(workdir, fakes, family))
            for number in range(args.warmup + args.runs):
                run = measure_memory(command, env, workdir, log, MEMORY_SESSIONS)
                if number >= args.warmup:
                    results.setdefault(family, []).append(run)
    return results


def print_memory(results: dict[str, list[MemoryRun]]) -> bool:
    def mib(values: list[float], digits: int = 1) -> str:
        low, high = min(values), max(values)
        return f"{statistics.median(values):.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"

    print(
        f"\n{'family':<11}{'after initialize':>20}{'after 1 session':>20}"
        f"{f'after {MEMORY_SESSIONS} sessions':>21}{'per idle session':>20}"
    )
    print("-" * 92)
    met = True
    for family, runs in results.items():
        growth = [r.per_session_mib(MEMORY_SESSIONS) for r in runs]
        verdict = ""
        if statistics.median(growth) > MEMORY_GROWTH_TARGET_MIB:
            verdict, met = " MISSED", False
        print(
            f"{family:<11}{mib([r.initialize_kib / 1024 for r in runs]):>20}"
            f"{mib([r.first_session_kib / 1024 for r in runs]):>20}"
            f"{mib([r.sessions_kib / 1024 for r in runs]):>21}{mib(growth, 3):>20}{verdict}"
        )
    print(
        f"\nVmRSS in MiB, median [min-max] over the runs (a fresh agent each). Target: at most "
        f"{MEMORY_GROWTH_TARGET_MIB:g} MiB more per idle session: {'met' if met else 'MISSED'}"
    )
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="measured runs per command")
    parser.add_argument(
        "--warmup", type=int, default=1, help="runs before measuring, not counted (default 1)"
    )
    parser.add_argument(
        "--via",
        choices=("script", "module", "both", "uvx"),
        default="script",
        help="start .venv/bin/acp-agent (what editors run; the default), python -m acp_agent, "
        "both, or the freshly built wheel through `uvx --from WHEEL acp-agent` (run at least "
        "one warm-up: the first run installs it)",
    )
    parser.add_argument(
        "--agent-log", type=Path, help="file for the agents' stderr (default: a temporary file)"
    )
    parser.add_argument("--fake-llm", type=Path, default=FAKE_LLM, help=argparse.SUPPRESS)
    parser.add_argument(
        "--memory", action="store_true", help="measure memory per provider path instead"
    )
    parser.add_argument(
        "--agent-command",
        metavar="COMMAND",
        help="start this command instead (another checkout's acp-agent, to compare)",
    )
    parser.add_argument("--json", action="store_true", help="also print every run as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be at least 1 and --warmup at least 0")

    log_path = args.agent_log or Path(tempfile.gettempdir()) / "acp-agent-startup-bench.log"
    compiled = compile_bytecode()
    if args.memory:
        return memory_main(args, log_path)
    try:
        with (
            open(log_path, "w", encoding="utf-8") as log,
            tempfile.TemporaryDirectory(prefix="acp-bench-") as workdir,
        ):
            series, imports = run_all(args, log, Path(workdir))
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc} (agent stderr: {log_path})", file=sys.stderr)
        return 2

    print(f"\nacp-agent start-up, prompt {PROMPT!r} answered by {args.fake_llm.name}")
    print(f"python {sys.version.split()[0]}, {_machine_load()}")
    if args.warmup:
        print(f"{args.warmup} warm-up run(s) before measuring, not counted")
    print(compiled)
    met = all([print_report(s) for s in series])
    met = print_imports(imports) and met
    print_floor(measure_floor(args.runs))
    print(
        f"\ntargets: initialize median <= {TARGETS_MS['initialize']:g} ms, session/new <= "
        f"{TARGETS_MS['session/new']:g} ms, first chunk <= {TARGETS_MS['first chunk']:g} ms, "
        f"RSS <= {RSS_TARGET_MIB:g} MiB, imports <= {IMPORT_BUDGET_MS:g} ms without a vendor "
        f"SDK: {'met' if met else 'MISSED'}"
    )
    print(f"agent stderr: {log_path}")
    if args.json:
        print(
            json.dumps(
                {s.label: [vars(r) for r in s.runs] for s in series},
                indent=2,
            )
        )
    return 1 if args.check and not met else 0


def compile_bytecode() -> str:
    """Compile the venv's packages and ours, as `pip install` leaves an installed program.

    `uv sync` writes no bytecode, and with PYTHONDONTWRITEBYTECODE set (as on CI machines)
    none is written on import either: every run would then compile every module it imports
    (about 0.4 s more to the first chunk), which no user's installation does.
    """
    targets = [str(Path(p)) for p in sys.path if p.endswith("site-packages")]
    targets.append(str(ROOT / "acp_agent"))
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", *targets],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    took = time.perf_counter() - started
    return f"bytecode: compiled as an installation has it ({took:.1f} s, {len(targets)} trees)"


def memory_main(args: argparse.Namespace, log_path: Path) -> int:
    try:
        with (
            open(log_path, "w", encoding="utf-8") as log,
            tempfile.TemporaryDirectory(prefix="acp-bench-") as workdir,
        ):
            results = run_memory(args, log, Path(workdir))
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc} (agent stderr: {log_path})", file=sys.stderr)
        return 2
    command = args.agent_command or "the project's acp-agent"
    print(f"\nacp-agent memory per provider path ({command})")
    print(f"python {sys.version.split()[0]}, {_machine_load()}; {args.runs} runs per family")
    met = print_memory(results)
    print(f"agent stderr: {log_path}")
    if args.json:
        print(json.dumps({family: [vars(r) for r in runs] for family, runs in results.items()}))
    return 1 if args.check and not met else 0


def _machine_load() -> str:
    """Timings on a busy machine are not comparable: say how busy it was."""
    cpus = os.cpu_count() or 0
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return f"{cpus} CPUs"
    return f"{cpus} CPUs, load average {one:.2f} (1 min) {five:.2f} (5 min)"


def run_all(
    args: argparse.Namespace, log: TextIO, workdir: Path
) -> tuple[list[Series], ImportProfile]:
    fake = FakeLLM(args.fake_llm, log)
    try:
        env = agent_env(fake.base_url)
        all_series = []
        commands = (
            [(args.agent_command, shlex.split(args.agent_command))]
            if args.agent_command
            else agent_commands(args.via, workdir)
        )
        for label, command in commands:
            series = Series(label, command)
            for number in range(args.warmup + args.runs):
                log.write(f"\n===== {label}: run {number + 1} =====\n")
                log.flush()
                try:
                    run = measure_once(command, env, workdir, log)
                except BenchmarkError as exc:
                    raise BenchmarkError(f"{label}, run {number + 1}: {exc}") from None
                if number >= args.warmup:
                    series.runs.append(run)
            if not label.startswith("uvx"):
                series.run_hi_ms = [
                    measure_run_hi(command, env, workdir, log) for _ in range(args.runs)
                ]
            all_series.append(series)
        return all_series, measure_imports(env, workdir)
    finally:
        fake.close()


if __name__ == "__main__":
    sys.exit(main())
