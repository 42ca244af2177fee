"""How much a subagent costs: the time to start one, and what it adds to each model request.

One agent process (the fake OpenAI server `tests/fake_llm.py` in this process, so both
clocks are the same) serves a client that advertises `subagents`. Per run:

- **start**: from the end of the parent's reply that calls `agent` to the child's first
  model request (the call parsed and shown, the child's session made, its log opened, its
  system prompt built, its request sent);
- **per request**: one tool round (`read_file`: the reply ends, the tool runs, the next
  request starts) in a session, against the same round inside a subagent: the difference
  is what a child adds to each of its requests (its updates under its own id, the parent's
  shared servers and tools).

Both are measured at the fake server, between one request's answer ending and the next
request starting, so no pipe or client latency is in them.

    uv run python benchmarks/subagents.py [--runs 20]

Standard library only (plus the project and the test fakes). No target: the numbers go in
the issue's note.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from fake_llm import FakeLLM, last_user_text  # noqa: E402


class Agent:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_agent"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self._id = 0

    def send(self, method: str, params: dict[str, Any]) -> int:
        self._id += 1
        frame = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        self.process.stdin.flush()
        return self._id

    def receive(self) -> tuple[float, dict[str, Any]]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the agent closed stdout")
        return time.monotonic(), json.loads(line)

    def answer(self, request_id: int) -> dict[str, Any]:
        while True:
            _, message = self.receive()
            if message.get("id") == request_id and "method" not in message:
                return message

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)


TOOL_ROUND = '[[tool read_file {"path": "hello.txt"}]] read it'
"""A prompt whose reply calls a tool: two model requests, one tool round between them."""


def one_run(fake: FakeLLM, env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(start, direct tool round, subagent tool round), in ms, each measured between two
    moments at the fake server: when one model request's answer ended and the next began."""
    agent = Agent(env, cwd)
    try:
        agent.answer(
            agent.send(
                "initialize",
                {"protocolVersion": 1, "clientCapabilities": {"subagents": {}}},
            )
        )
        session = agent.answer(agent.send("session/new", {"cwd": str(cwd), "mcpServers": []}))
        session_id = session["result"]["sessionId"]
        agent.answer(agent.send("session/prompt", _prompt(session_id, "warm-up")))
        fake.clear()
        agent.answer(agent.send("session/prompt", _prompt(session_id, TOOL_ROUND)))
        direct = _gap(fake.exchanges[0], fake.exchanges[1])

        fake.clear()
        call = json.dumps({"description": "bench", "prompt": TOOL_ROUND})
        agent.answer(agent.send("session/prompt", _prompt(session_id, f"[[tool agent {call}]]")))
        parent_call, child_first, child_second = fake.exchanges[:3]
        assert "read it" in last_user_text(child_first.body)
        return _gap(parent_call, child_first), direct, _gap(child_first, child_second)
    finally:
        agent.close()


def _gap(before: Any, after: Any) -> float:
    assert before.ended is not None
    return (after.started - before.ended) * 1000


def _prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    starts, directs, childs = [], [], []
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "hello.txt").write_text("hello\n")
        home = Path(tmp) / "home"
        home.mkdir()
        env = {
            **os.environ,
            "HOME": str(home),
            "OPENAI_API_KEY": "bench-key",
            "OPENAI_BASE_URL": fake.base_url,
            "ACP_AGENT_MODEL": "fake-model",
        }
        env.pop("ACP_AGENT_CONFIG", None)
        for _ in range(args.runs):
            start, direct, child = one_run(fake, env, Path(tmp))
            starts.append(start)
            directs.append(direct)
            childs.append(child)
    print(f"subagents, {args.runs} runs (ms)")
    for label, values in (
        ("start: agent call answered -> child request", starts),
        ("tool round in a session (read_file)", directs),
        ("tool round in a subagent (read_file)", childs),
    ):
        print(
            f"  {label:44s} median {statistics.median(values):7.1f}"
            f"  min {min(values):7.1f}  max {max(values):7.1f}"
        )
    overhead = statistics.median(childs) - statistics.median(directs)
    print(f"  overhead per request (subagent - session, medians)   {overhead:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
