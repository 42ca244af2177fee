"""What the per-family benchmarks share: both fake servers with their timings, a config that
points the agent at them, and a median / min-max summary.

Three API families, one model each, all answered on 127.0.0.1:

    chat        OpenAI Chat Completions   tests/fake_llm.py       POST /v1/chat/completions
    responses   OpenAI Responses API      tests/fake_llm.py       POST /v1/responses
    anthropic   Anthropic Messages API    tests/fake_anthropic.py POST /v1/messages

The fakes run as subprocesses with `--timings`: each finished exchange prints one JSON line
with `time.monotonic()` stamps (request body received, first byte of the answer sent,
answer ended). On Linux that clock is system-wide, so the stamps compare directly with this
process's `time.monotonic()`: the benchmarks time the agent against the fake's own clock.

Standard library only (plus the project's test fakes, run as scripts). Every benchmark
imports this module; it imports none of them.
"""

from __future__ import annotations

import json
import os
import selectors
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
# Variables that would point the agent somewhere else than the fake servers.
SCRUBBED_ENV = ("ACP_AGENT_CONFIG", "ACP_AGENT_MODEL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")
FAKE_LLM = ROOT / "tests" / "fake_llm.py"
FAKE_ANTHROPIC = ROOT / "tests" / "fake_anthropic.py"
FAMILIES = ("chat", "responses", "anthropic")
MODELS = {
    "chat": "fake/chat-model",
    "responses": "fake/responses-model",
    "anthropic": "claude/fake",
}
PATHS = {"chat": "/chat/completions", "responses": "/responses", "anthropic": "/messages"}
CONTEXT_WINDOW = 1_000_000_000
"""Large enough that no benchmark history ever reaches compaction."""
KEY_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


class BenchmarkError(Exception):
    """A run that did not reach its goal; the message says where it stopped."""


def read_line(stream: IO[str], timeout: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise BenchmarkError(f"no output within {timeout:g}s")
    return stream.readline()


class FakeProcess:
    """`python <fake> --port 0 --timings`: its base URL, and the timings it prints."""

    def __init__(self, script: Path, log: TextIO) -> None:
        if not script.is_file():
            raise BenchmarkError(f"{script} not found")
        self.process = subprocess.Popen(
            [sys.executable, str(script), "--port", "0", "--timings"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        assert self.process.stdout is not None
        line = read_line(self.process.stdout, timeout=15.0)
        if not line.startswith("http"):
            self.close()
            raise BenchmarkError(f"{script.name} printed {line!r} instead of its base URL")
        self.base_url = line.strip()
        self._timings: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        # Drained all the time: a full pipe would stall the fake mid-answer.
        self._reader = threading.Thread(target=self._read, name=f"{script.stem}-timings")
        self._reader.daemon = True
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                timing = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._changed:
                self._timings.append(timing)
                self._changed.notify_all()

    def exchanges(self, since: float, path: str, count: int = 1, timeout: float = 5.0) -> list[Any]:
        """The first `count` exchanges on `path` whose request arrived after `since`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [
                    t
                    for t in self._timings
                    if t["path"].split("?")[0].endswith(path) and (t["received"] or 0) >= since
                ]
                if len(found) >= count:
                    return found[:count]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BenchmarkError(f"the fake reported {len(found)} of {count} exchanges")
                self._changed.wait(remaining)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


class Fakes:
    """Both fake servers, as a context manager."""

    def __init__(self, log: TextIO) -> None:
        self.openai = FakeProcess(FAKE_LLM, log)
        try:
            self.anthropic = FakeProcess(FAKE_ANTHROPIC, log)
        except BaseException:
            self.openai.close()
            raise

    def __enter__(self) -> Fakes:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.openai.close()
        self.anthropic.close()

    def for_family(self, family: str) -> FakeProcess:
        return self.anthropic if family == "anthropic" else self.openai


def write_config(directory: Path, fakes: Fakes, family: str) -> Path:
    """A config file whose default model speaks `family`; sessions stored in `directory`."""
    path = directory / f"config-{family}.toml"
    window = CONTEXT_WINDOW
    path.write_text(
        f"""default_model = "{MODELS[family]}"
state_dir = "{directory / "state"}"

[providers.fake]
type = "openai"
base_url = "{fakes.openai.base_url}"
api_key = "bench-key"
models = [
    {{ id = "chat-model", context_window = {window} }},
    {{ id = "responses-model", api = "responses", context_window = {window} }},
]

[providers.claude]
type = "anthropic"
base_url = "{fakes.anthropic.base_url}"
api_key = "bench-key"
models = [{{ id = "fake", context_window = {window} }}]
""",
        encoding="utf-8",
    )
    return path


def agent_env(config: Path) -> dict[str, str]:
    """Our environment, minus anything that points the agent elsewhere, plus `config`."""
    scrubbed = (*SCRUBBED_ENV, *KEY_VARIABLES)
    env = {k: v for k, v in os.environ.items() if k not in scrubbed}
    env.update(ACP_AGENT_CONFIG=str(config), PYTHONUNBUFFERED="1")
    return env


def spread(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> str:
    """'median [min-max]' of `values` times `scale`."""
    if not values:
        return "n/a"
    median = statistics.median(values) * scale
    low, high = min(values) * scale, max(values) * scale
    return f"{median:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"
