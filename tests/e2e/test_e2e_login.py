"""Logging in end to end: `python -m acp_agent login` as a subprocess (stdin a pipe, and a
real pseudo-terminal as an editor's login terminal gives it) against the fake servers'
`GET /models`, then the agent, driven by the `agent-client-protocol` package's client with
Zed's exact initialize, using the stored key; `logout` over ACP and on the command line.

Every process gets a throwaway HOME / XDG_CONFIG_HOME / XDG_STATE_HOME and no API-key
variable: the stored key is the only one there is.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import os
import select
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import ClientCapabilities, Implementation
from e2e_support import AGENT_COMMAND, E2E_DIR, MODEL, checked_agent_process
from fake_anthropic import FakeAnthropic
from fake_llm import FakeLLM

pytestmark = [pytest.mark.e2e]

KEY = "sk-e2e-login-5f4e3d2c1b0a99887766"
HANG_GUARD = 30.0


def _zed_initialize() -> dict[str, Any]:
    """`ZED_INITIALIZE` of tests/protocol/fake_acp_client.py (Zed's exact handshake)."""
    path = E2E_DIR.parent / "protocol" / "fake_acp_client.py"
    spec = importlib.util.spec_from_file_location("_zed_fake_acp_client", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return copy.deepcopy(module.ZED_INITIALIZE)


ZED_INITIALIZE = _zed_initialize()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def env(home: Path, fake_llm: FakeLLM) -> dict[str, str]:
    """No key anywhere; the OpenAI fake as the API, which checks keys on `GET /models`."""
    fake_llm.models_keys = {KEY}
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "PATH": os.environ.get("PATH", os.defpath),
        "OPENAI_BASE_URL": fake_llm.base_url,
        "ACP_AGENT_MODEL": MODEL,
    }


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(api_key=KEY) as fake:
        yield fake


def credentials(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "acp-agent" / "credentials.json"


def login(env: dict[str, str], stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENT_COMMAND, "login", *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def everything_written(home: Path) -> str:
    """Every file under `home` (sessions, logs, config), as text."""
    return "".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in home.rglob("*")
        if path.is_file() and path.name != "credentials.json"
    )


def session_files(home: Path) -> list[Path]:
    return [p for p in home.rglob("*.jsonl") if p.parent.name == "sessions"]


# --- the command -----------------------------------------------------------------------------


def test_login_checks_the_key_and_stores_it_owner_only(
    env: dict[str, str], fake_llm: FakeLLM
) -> None:
    refused = login(env, "sk-wrong-000000000000000000\n", "openai")
    assert refused.returncode == 1
    assert "refused the key (HTTP 401" in refused.stderr
    assert "sk-wrong-000000000000000000" not in refused.stdout + refused.stderr
    assert not credentials(env).exists()

    done = login(env, KEY + "\n")
    assert done.returncode == 0, done.stderr
    assert "Logged in to openai" in done.stdout
    assert KEY not in done.stdout + done.stderr
    [check] = [e for e in fake_llm.exchanges if e.path.endswith("/models") and e.status == 200]
    assert check.method == "GET"
    assert check.headers["authorization"] == f"Bearer {KEY}"
    path = credentials(env)
    assert json.loads(path.read_text())["providers"] == {"openai": {"api_key": KEY}}
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_login_checks_an_anthropic_key_with_anthropics_api(
    env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    env = {**env, "ANTHROPIC_BASE_URL": fake_anthropic.base_url}
    assert login(env, "sk-ant-wrong-0000000000\n", "anthropic").returncode == 1
    done = login(env, KEY + "\n", "anthropic")
    assert done.returncode == 0, done.stderr
    [check] = [e for e in fake_anthropic.exchanges if e.status == 200]
    assert (check.method, check.path) == ("GET", "/v1/models")
    assert json.loads(credentials(env).read_text())["providers"] == {"anthropic": {"api_key": KEY}}


def test_logout_on_the_command_line_forgets_the_key(env: dict[str, str]) -> None:
    assert login(env, KEY + "\n", "--no-check").returncode == 0
    result = subprocess.run(
        [*AGENT_COMMAND, "logout"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "Forgot the stored key of openai." in result.stdout
    assert not credentials(env).exists()


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_the_terminal_method_logs_in_through_a_real_terminal(
    env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """What Zed does with the `terminal` method: run our command plus its `args` in a
    terminal, where the user picks a provider and types the key (not echoed)."""
    env = {**env, "ANTHROPIC_BASE_URL": fake_anthropic.base_url}
    initialize = asyncio.run(_initialize_only(env))
    [method] = [m for m in initialize["authMethods"] if m.get("type") == "terminal"]

    transcript, code = _in_terminal([*AGENT_COMMAND, *method["args"]], env, ["2", KEY])

    assert code == 0, transcript
    assert "1. openai" in transcript and "2. anthropic" in transcript
    assert "API key for anthropic (input hidden):" in transcript
    assert KEY not in transcript, "the key is not echoed"
    assert "Logged in to anthropic" in transcript
    assert json.loads(credentials(env).read_text())["providers"] == {"anthropic": {"api_key": KEY}}


# --- the agent using it ----------------------------------------------------------------------


class QuietClient:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)


async def _initialize_only(env: dict[str, str]) -> dict[str, Any]:
    async with checked_agent_process(
        QuietClient(), *AGENT_COMMAND, env=env, transport_kwargs={"stderr": subprocess.DEVNULL}
    ) as (conn, _process):
        response = await asyncio.wait_for(_zed_handshake(conn), HANG_GUARD)
    answer: dict[str, Any] = response.model_dump(by_alias=True, exclude_none=True)
    return answer


async def _zed_handshake(conn: Any) -> Any:
    params = ZED_INITIALIZE
    return await conn.initialize(
        protocol_version=params["protocolVersion"],
        client_capabilities=ClientCapabilities.model_validate(params["clientCapabilities"]),
        client_info=Implementation.model_validate(params["clientInfo"]),
    )


@pytest.mark.anyio
async def test_the_agent_uses_the_stored_key_and_never_writes_it_down(
    env: dict[str, str], fake_llm: FakeLLM, home: Path, tmp_path: Path
) -> None:
    assert login(env, KEY + "\n").returncode == 0
    log_file = tmp_path / "agent.log"
    client = QuietClient()
    async with checked_agent_process(
        client,
        *AGENT_COMMAND,
        "--log-level",
        "debug",
        "--log-file",
        str(log_file),
        env=env,
        cwd=tmp_path,
        transport_kwargs={"stderr": subprocess.DEVNULL},
    ) as (conn, _process):
        initialized = await asyncio.wait_for(_zed_handshake(conn), HANG_GUARD)
        session = await asyncio.wait_for(
            conn.new_session(cwd=str(tmp_path), mcp_servers=[]), HANG_GUARD
        )
        reply = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[text_block(f"hello {KEY}")]),
            HANG_GUARD,
        )
        # The SDK client 0.12.1 has no `logout` call: the raw request.
        forgot = await asyncio.wait_for(conn._conn.send_request("logout", {}), HANG_GUARD)

    methods = {m.id: m for m in initialized.auth_methods}
    assert methods["acp-agent-login"].type == "terminal"
    assert methods["acp-agent-login"].args == ["login"]
    assert initialized.agent_capabilities.auth.logout is not None
    assert reply.stop_reason == "end_turn"
    [chat] = [e for e in fake_llm.exchanges if e.path.endswith("/chat/completions")]
    assert chat.headers["authorization"] == f"Bearer {KEY}"
    assert forgot == {}
    assert not credentials(env).exists()
    written = everything_written(home) + everything_written(log_file.parent)
    assert session_files(home), "the session was written"
    assert KEY not in written, "the stored key reached a log or a session file"


# --- a pseudo-terminal -----------------------------------------------------------------------


def _in_terminal(command: list[str], env: dict[str, str], answers: list[str]) -> tuple[str, int]:
    """Run `command` on a new pseudo-terminal, typing each answer after the next prompt
    (a line ending in ": "); returns what the terminal showed and the exit code."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its controlling tty, as in an editor
        try:
            os.execvpe(command[0], command, env)
        finally:
            os._exit(127)
    shown = b""
    pending = list(answers)
    deadline = time.monotonic() + HANG_GUARD
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
                if pending and shown.rstrip(b" ").endswith(b":"):
                    os.write(fd, pending.pop(0).encode() + b"\r")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return shown.decode("utf-8", errors="replace"), os.waitstatus_to_exitcode(status)
