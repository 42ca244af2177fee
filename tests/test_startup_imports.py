"""What a freshly started agent imports before it is usable: no vendor SDK, no `mcp`.

The agent runs as a subprocess under `python -X importtime`, which writes a line to stderr
as each module finishes importing; stderr is unbuffered, so once an answer is on stdout,
every import that happened before it is in the file. The agent imports on at once, so the
tests read the file only up to the mark it writes before each answer (`MARKING_AGENT`). A
module that `importlib.import_module` loads (the MCP bridge's names, the turn side) has no
line of its own, so each mark also lists `sys.modules` as it stands.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from fake_anthropic import FakeAnthropic, anthropic_reply
from fake_llm import FakeLLM
from schema_support import assert_frames_from_agent

from acp_agent.protocol.server import SCHEMA_WARM_DELAY

VENDOR_MODULES = ("openai", "anthropic", "mcp", "boto3", "botocore", "google", "opentelemetry")
TIMEOUT = 60.0


WRITING_MARK = "--- frames written, counting these: "
MARKING_AGENT = f"""
import runpy, sys
from acp_agent.protocol import dialect
from acp_agent.rpc import framing

write_all = framing.write_all
frames = 0

def mark_then_write(fd, data):
    global frames
    frames += data.count(b"\\n")
    sys.stderr.write({WRITING_MARK!r} + str(frames) + " " + ",".join(list(sys.modules)) + "\\n")
    sys.stderr.flush()
    write_all(fd, data)

dialect.write_all = framing.write_all = mark_then_write
sys.argv = ["acp_agent"]
runpy.run_module("acp_agent", run_name="__main__", alter_sys=True)
"""
"""`python -m acp_agent` that marks in stderr each time it is about to write frames (the
fast path's `initialize` answer, then the server's writes), with how many it will have
written and the modules loaded by then: the agent imports on at once after an answer, so
the client, reading stderr once the answer arrived, could see later imports; what came
before the mark came before the answer. The mark goes first, so it is in the file when the
answer arrives."""


class Agent:
    """`python -X importtime -m acp_agent` with newline-delimited JSON-RPC on stdio; every
    frame it writes is checked against the v1 schema when it is closed (not as each frame
    arrives: checking takes long enough for the agent to import on before a test reads
    what it imported)."""

    def __init__(self, env: dict[str, str], cwd: Path, stderr: Path) -> None:
        self.stderr_path = stderr
        self.started = time.monotonic()
        self._stderr = stderr.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-c", MARKING_AGENT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=cwd,
        )
        self._next_id = 0
        self._sent: list[dict[str, Any]] = []
        self._received: list[dict[str, Any]] = []

    def request(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        frame = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        self._sent.append(frame)
        stdin = self._pipe(self.process.stdin)
        stdin.write(json.dumps(frame).encode() + b"\n")
        stdin.flush()
        return self._next_id

    def respond(self, request_id: Any, result: dict[str, Any]) -> None:
        """Answer a request the agent sent (a permission question)."""
        frame = {"jsonrpc": "2.0", "id": request_id, "result": result}
        self._sent.append(frame)
        stdin = self._pipe(self.process.stdin)
        stdin.write(json.dumps(frame).encode() + b"\n")
        stdin.flush()

    def receive(self) -> dict[str, Any]:
        line = self._pipe(self.process.stdout).readline()
        assert line, f"the agent closed stdout; stderr:\n{self.stderr_tail()}"
        message: dict[str, Any] = json.loads(line)
        self._received.append(message)
        return message

    def answer(self, request_id: int) -> Any:
        while True:
            message = self.receive()
            if message.get("id") == request_id and "method" not in message:
                assert "error" not in message, message
                return message["result"]

    def imported(self) -> set[str]:
        """Every module imported before the agent wrote the last frame received (its
        import finished)."""
        lines = self.stderr_path.read_text(encoding="utf-8").splitlines()
        written = len(self._received)
        for index, line in enumerate(lines):
            if line.startswith(WRITING_MARK):
                count, loaded = line.removeprefix(WRITING_MARK).split(" ", 1)
                if int(count) >= written:
                    return self._imports(lines[:index]) | set(loaded.split(","))
        raise AssertionError(f"no mark of the agent writing frame {written}")

    @staticmethod
    def _imports(lines: list[str]) -> set[str]:
        return {
            line.rsplit("|", 1)[1].strip()
            for line in lines
            if line.startswith("import time:") and "self [us]" not in line
        }

    def stderr_tail(self) -> str:
        lines = self.stderr_path.read_text(encoding="utf-8").splitlines()
        told = [line for line in lines if not line.startswith(("import time:", WRITING_MARK))]
        return "\n".join(told)[-3000:]

    def close(self) -> None:
        self._pipe(self.process.stdin).close()
        try:
            self.process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        stdout = self._pipe(self.process.stdout)
        rest = stdout.read()
        stdout.close()
        self._stderr.close()
        self._received += [json.loads(line) for line in rest.splitlines()]
        assert_frames_from_agent("v1", self._received, self._sent)

    @staticmethod
    def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
        assert stream is not None
        return stream


def vendors(modules: set[str]) -> list[str]:
    return sorted(name for name in modules if name.split(".", 1)[0] in VENDOR_MODULES)


def environment(tmp_path: Path, **variables: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "PYTHONUNBUFFERED": "1",
        **variables,
    }


@pytest.fixture
def echo_agent(tmp_path: Path) -> Iterator[Agent]:
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "echo/echo"\n\n[providers.echo]\ntype = "echo"\n', encoding="utf-8"
    )
    agent = Agent(environment(tmp_path, ACP_AGENT_CONFIG=str(config)), tmp_path, tmp_path / "err")
    yield agent
    agent.close()


@pytest.fixture
def openai_agent(tmp_path: Path) -> Iterator[tuple[Agent, FakeLLM]]:
    with FakeLLM() as fake:
        env = environment(
            tmp_path,
            OPENAI_API_KEY="sk-test-startup",
            OPENAI_BASE_URL=fake.base_url,
            ACP_AGENT_MODEL="fake-model",
        )
        agent = Agent(env, tmp_path, tmp_path / "err")
        yield agent, fake
        agent.close()


@pytest.fixture
def anthropic_agent(tmp_path: Path) -> Iterator[Agent]:
    with FakeAnthropic() as fake:
        config = tmp_path / "config.toml"
        config.write_text(
            f"""default_model = "claude/claude-fake"

[providers.claude]
type = "anthropic"
base_url = "{fake.base_url.removesuffix("/v1")}"
api_key = "sk-ant-test-startup"
models = [{{ id = "claude-fake", context_window = 200000 }}]
""",
            encoding="utf-8",
        )
        agent = Agent(
            environment(tmp_path, ACP_AGENT_CONFIG=str(config)), tmp_path, tmp_path / "err"
        )
        yield agent
        agent.close()


INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}


def first_session(agent: Agent, cwd: Path) -> str:
    """`initialize`, then a new session in `cwd`: its id."""
    agent.answer(agent.request("initialize", INITIALIZE))
    new = agent.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    session_id: str = agent.answer(new)["sessionId"]
    return session_id


def prompt_reply(agent: Agent, cwd: Path, text: str) -> tuple[str, set[str] | None]:
    """The reply to a first prompt in a new session, and the modules imported by the time
    its first chunk arrived."""
    session_id = first_session(agent, cwd)
    prompt = agent.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    )
    chunks: list[str] = []
    at_first_chunk: set[str] | None = None
    while True:
        message = agent.receive()
        update = (message.get("params") or {}).get("update") or {}
        if update.get("sessionUpdate") == "agent_message_chunk":
            chunks.append(update["content"]["text"])
            if at_first_chunk is None:
                at_first_chunk = agent.imported()
        if message.get("id") == prompt and "method" not in message:
            assert message["result"]["stopReason"] == "end_turn", message
            return "".join(chunks).strip(), at_first_chunk


def test_a_new_session_answers_before_any_vendor_sdk_or_mcp_is_imported(
    echo_agent: Agent, tmp_path: Path
) -> None:
    echo_agent.answer(echo_agent.request("initialize", INITIALIZE))
    at_initialize = echo_agent.imported()
    new = echo_agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    session = echo_agent.answer(new)
    loaded = echo_agent.imported()

    assert session["sessionId"]
    assert "acp_agent.sessions.manager" in loaded
    assert vendors(at_initialize) == []
    assert vendors(loaded) == []
    # The `initialize` answer is plain data, written before the event loop exists: none of
    # the commands' parsers, login code, pydantic, asyncio or anyio.
    assert not [name for name in at_initialize if name.rsplit(".", 1)[-1] == "login"]
    early = {name.split(".")[0] for name in at_initialize}
    assert not early & {"pydantic", "asyncio", "anyio", "argparse"}, early
    # A session answers without the schema models (half a second of imports).
    assert "acp_agent.protocol._schema_models" not in loaded
    assert "acp.schema" not in loaded
    # web_fetch's HTTP client and HTML converter wait for its first fetch (~40 ms).
    assert not {"httpx2", "acp_agent.tools._web_http", "acp_agent.tools._web_content"} & loaded
    # No pydantic model it does not use: the legacy `session/set_model` shapes wait for that
    # request, the MCP tools' arguments model for a session with MCP servers.
    assert not {"acp_agent.protocol.legacy", "acp_agent.sessions.mcp_tools"} & loaded
    # Nor the turn machinery: the runner, the model loop, compaction, the slash commands,
    # subagents and the project's knowledge load after the answer, for the first prompt.
    turn_side = {
        "acp_agent.sessions.turns",
        "acp_agent.engine",
        "acp_agent.sessions.compaction",
        "acp_agent.sessions.commands",
        "acp_agent.sessions.subagents",
        "acp_agent.sessions.project",
        "acp_agent.knowledge.instructions",
    }
    assert not turn_side & loaded, sorted(turn_side & loaded)
    # Nor, for a session without MCP servers, the bridge's hub and transports.
    bridge = {f"acp_agent.mcp_bridge.{name}" for name in ("hub", "_link", "_stdio_transport")}
    assert not bridge & loaded, sorted(bridge & loaded)


def test_an_mcp_server_is_used_without_the_sdks_server_side(
    echo_agent: Agent, tmp_path: Path
) -> None:
    echo_agent.answer(echo_agent.request("initialize", INITIALIZE))
    server = {
        "name": "lists",
        "command": sys.executable,
        "args": [str(Path(__file__).parent / "mcp_servers" / "lists_together.py")],
        "env": [],
    }
    new = echo_agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": [server]})
    session_id = echo_agent.answer(new)["sessionId"]

    shown = slash_command_reply(echo_agent, session_id, "/mcp")
    loaded = echo_agent.imported()

    assert ": ready" in shown and "tools: mcp__lists__ping" in shown, shown
    assert "mcp.client.session" in loaded
    # The SDK's packages import its server too (a quarter of its imports): not for a client.
    server_side = {"mcp.server", "starlette", "uvicorn", "sse_starlette"}
    assert not server_side & loaded, sorted(server_side & loaded)


BUILTIN_TOOL_MODULES = {
    f"acp_agent.tools.{name}"
    for name in (
        "read_file",
        "search",
        "edit_file",
        "write_file",
        "shell",
        "jobs",
        "plan",
        "agent",
        "web_fetch",
        "ask_user",
    )
}


def slash_command_reply(agent: Agent, session_id: str, command: str) -> str:
    prompt = agent.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": command}]}
    )
    chunks: list[str] = []
    while True:
        message = agent.receive()
        update = (message.get("params") or {}).get("update") or {}
        if update.get("sessionUpdate") == "agent_message_chunk":
            chunks.append(update["content"]["text"])
        if message.get("id") == prompt and "method" not in message:
            assert message["result"]["stopReason"] == "end_turn", message
            return "".join(chunks)


def test_a_new_session_answers_before_its_tools_and_token_encoder_are_built(
    tmp_path: Path,
) -> None:
    # A tiktoken stand-in, so that loading the encoder shows as an import (the real
    # encoding file is not on this machine, and tiktoken would download it); any text is
    # one token to it.
    fake = tmp_path / "fake-tiktoken"
    (fake / "tiktoken").mkdir(parents=True)
    (fake / "tiktoken" / "__init__.py").write_text(
        "class _OneToken:\n"
        "    def encode_ordinary(self, text):\n"
        "        return [0]\n\n\n"
        "def get_encoding(name):\n"
        "    return _OneToken()\n",
        encoding="utf-8",
    )
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"")
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "echo/echo"\n\n[providers.echo]\ntype = "echo"\n', encoding="utf-8"
    )
    env = environment(
        tmp_path,
        ACP_AGENT_CONFIG=str(config),
        PYTHONPATH=str(fake),
        TIKTOKEN_CACHE_DIR=str(cache),
    )
    agent = Agent(env, tmp_path, tmp_path / "err")
    try:
        session_id = first_session(agent, tmp_path)
        at_new = agent.imported()
        report = slash_command_reply(agent, session_id, "/context")
        after_prompt = agent.imported()
        tail = agent.stderr_tail()
    finally:
        agent.close()

    assert not BUILTIN_TOOL_MODULES & at_new, sorted(BUILTIN_TOOL_MODULES & at_new)
    assert "tiktoken" not in at_new
    # The first prompt (a slash command is one) waited for them: all the tools are there,
    # and the counts are the tokenizer's.
    assert BUILTIN_TOOL_MODULES - {"acp_agent.tools.ask_user"} <= after_prompt
    assert "tiktoken" in after_prompt
    assert "token counts are estimates" not in tail
    assert re.match(r"System prompt: 1 tokens?\. Tools: 10 offered, 1 tokens? ", report), report


def test_the_first_prompt_streams_without_the_schema_models(
    echo_agent: Agent, tmp_path: Path
) -> None:
    reply, at_first_chunk = prompt_reply(echo_agent, tmp_path, "Say hello")

    assert reply  # the echo provider answered
    assert at_first_chunk is not None
    assert "acp.schema" not in at_first_chunk
    # Nor, without MCP servers, the bridge's plain data of their tools and prompts.
    assert "acp_agent.mcp_bridge.model" not in at_first_chunk


def test_the_first_prompt_to_an_openai_compatible_server_streams_without_the_openai_sdk(
    openai_agent: tuple[Agent, FakeLLM], tmp_path: Path
) -> None:
    agent, fake = openai_agent

    reply, at_first_chunk = prompt_reply(agent, tmp_path, "Say hello")
    answered = agent.imported()

    assert reply == "Fake reply to: Say hello"
    assert len(fake.requests) == 1
    assert at_first_chunk is not None and "acp_agent.providers._openai_client" in at_first_chunk
    assert vendors(at_first_chunk) == []
    assert vendors(answered) == []  # the finishing chunk and the usage need no SDK either


def test_the_first_permission_question_is_asked_without_the_schema_models(
    openai_agent: tuple[Agent, FakeLLM], tmp_path: Path
) -> None:
    agent, fake = openai_agent
    session_id = first_session(agent, tmp_path)
    call = '[[tool shell {"command": "echo hi"}]]'
    prompt = agent.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": call}]}
    )
    while (message := agent.receive()).get("method") != "session/request_permission":
        assert message.get("id") != prompt, message  # the prompt ended without asking
    asked_after = time.monotonic() - agent.started
    loaded = agent.imported()

    # Asked before the schema models warm up (half a second of imports the user would
    # wait for): the question is written as plain JSON. A machine too busy to ask within
    # the warm-up's delay cannot tell.
    if asked_after < SCHEMA_WARM_DELAY:
        assert "acp.schema" not in loaded
    assert message["params"]["toolCall"]["rawInput"] == {"command": "echo hi"}
    agent.respond(message["id"], {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    assert agent.answer(prompt)["stopReason"] == "end_turn"
    assert "hi" in fake.requests[-1]["messages"][-1]["content"]


def test_a_new_session_answers_before_the_provider_and_its_http_client_load(
    openai_agent: tuple[Agent, FakeLLM], tmp_path: Path
) -> None:
    agent, fake = openai_agent
    session_id = first_session(agent, tmp_path)
    loaded = agent.imported()

    # The first prompt imports them (in a worker thread): a session does not wait for them.
    assert not {"acp_agent.providers.openai_chat", "acp_agent.providers._openai_client"} & loaded
    prompt = agent.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
    )
    assert agent.answer(prompt)["stopReason"] == "end_turn"
    assert len(fake.requests) == 1


def test_the_first_prompt_to_anthropic_streams_without_the_anthropic_sdk(
    anthropic_agent: Agent, tmp_path: Path
) -> None:
    reply, at_first_chunk = prompt_reply(anthropic_agent, tmp_path, "Say hello")
    answered = anthropic_agent.imported()

    assert reply == anthropic_reply("Say hello")
    assert at_first_chunk is not None and "acp_agent.providers._anthropic_stream" in at_first_chunk
    assert vendors(answered) == []


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["--debug"],
        ["--config", "a.toml", "--log-level", "debug"],
        ["--log-file=x.log", "--config=b.toml", "--debug"],
    ],
)
def test_a_plain_acp_agent_reads_its_options_as_the_full_parser_does(words: list[str]) -> None:
    from acp_agent.cli import _parser, _serve_options

    quick = _serve_options(words)
    full = _parser().parse_args(words)

    assert quick is not None
    assert vars(quick) == {key: vars(full)[key] for key in vars(quick)}


@pytest.mark.parametrize(
    "words", [["run", "hi"], ["--help"], ["--version"], ["--log-level", "loud"], ["--config"]]
)
def test_anything_else_is_left_to_the_full_parser(words: list[str]) -> None:
    from acp_agent.cli import _serve_options

    assert _serve_options(words) is None
