"""No process we start can read our keys through /proc (`acp_agent/_hardening.py`).

Root reads every /proc entry, so these tests run each acp-agent process as an ordinary
user: themselves when not root, else `nobody`. Its interpreter must be one that user can
run: ours if it can reach it, else a system-wide Python of the same version pointed at our
site-packages by a few symlinks (ours may live under /root, mode 700).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM
from schema_support import assert_frames_from_agent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

TIMEOUT = 60
SECRET = f"sk-test-secret-{secrets.token_hex(8)}"
OTHER_SECRET = f"sk-test-other-{secrets.token_hex(8)}"
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"

# What a hostile command does: read the environment of its parent, of the parent's other
# children, then of every process it can.
PEEK = (
    'echo "parent $PPID $(tr "\\0" " " < /proc/$PPID/cmdline)"; '
    "for p in $PPID $(cat /proc/$PPID/task/*/children); do "
    '[ "$p" = "$$" ] || cat /proc/$p/environ; done 2>&1 | tr "\\0" "\\n"; '
    'cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | grep -i key; '
    "echo command-ran"
)
PEEK_PROMPT = f"[[tool shell {json.dumps({'command': PEEK})}]]"


@dataclass(frozen=True)
class User:
    """How to run a process as the ordinary user, and a directory it may write in."""

    python: str
    root: Path
    options: dict[str, Any]

    def directory(self, name: str) -> Path:
        path = self.root / name
        path.mkdir()
        if self.options:
            os.chown(path, self.options["user"], self.options["group"])
        return path

    def env(self, home: Path, **more: str) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home), **more}


@pytest.fixture(scope="module")
def user() -> Iterator[User]:
    root = Path(tempfile.mkdtemp(prefix="acp-hardening-"))
    root.chmod(0o755)  # pytest's tmp_path is private to root
    try:
        yield _ordinary_user(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _ordinary_user(root: Path) -> User:
    if os.geteuid() != 0:
        return User(sys.executable, root, {})
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root and there is no user `nobody` to run the agent as")
    options = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    if _runs_as(sys.executable, options):
        return User(sys.executable, root, options)
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        python = _venv_on(Path(folder, f"python{VERSION}"), root)
        if python is not None and _runs_as(python, options):
            return User(python, root, options)
    real = Path(sys.executable).resolve()
    closed = [str(p) for p in reversed(real.parents) if not p.stat().st_mode & stat.S_IXOTH]
    pytest.skip(
        f"no Python {VERSION} that uid {nobody.pw_uid} can run: {sys.executable} is {real}; "
        f"`chmod o+x {' '.join(closed) or '<its directories>'}` (e.g. in .ci/run) or a "
        f"system-wide python{VERSION} would let this test run"
    )


def _venv_on(base: Path, root: Path) -> str | None:
    """A venv of symlinks: `base` as its interpreter, our site-packages as its own."""
    if not base.exists():
        return None
    venv = root / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / f"python{VERSION}").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base.parent}\n", encoding="utf-8")
    (venv / "bin" / "python").symlink_to(base)
    (venv / "lib" / f"python{VERSION}" / "site-packages").symlink_to(
        sysconfig.get_paths()["purelib"]
    )
    return str(venv / "bin" / "python")


def _runs_as(python: str, options: dict[str, Any]) -> bool:
    probe = f"import sys, acp_agent.cli; assert sys.version_info[:2] == {sys.version_info[:2]}"
    try:
        result = subprocess.run(
            [python, "-c", probe], cwd="/", capture_output=True, timeout=TIMEOUT, **options
        )
    except OSError:
        return False
    return result.returncode == 0


def run_python(user: User, script: str, env: dict[str, str]) -> dict[str, Any]:
    """Run `script` as the ordinary user; it prints one JSON object, returned here."""
    result = subprocess.run(
        [user.python, "-c", script],
        cwd=user.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        **user.options,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


# --- the primitive --------------------------------------------------------------------------

READ_PARENT = """
import sys
try:
    print(open(f"/proc/{sys.argv[1]}/environ", "rb").read().decode())
except OSError as exc:
    print(type(exc).__name__)
"""

BEFORE_AND_AFTER = f"""
import json, os, subprocess, sys
from acp_agent._hardening import forbid_inspection

def child_reads_us():
    return subprocess.run(
        [sys.executable, "-c", {READ_PARENT!r}, str(os.getpid())],
        env={{}}, capture_output=True, text=True, check=True,
    ).stdout

before = child_reads_us()
failure = forbid_inspection()
print(json.dumps({{"before": before, "failure": failure, "after": child_reads_us()}}))
"""


def test_a_child_started_after_hardening_cannot_read_our_environment_and_one_before_could(
    user: User,
) -> None:
    seen = run_python(user, BEFORE_AND_AFTER, user.env(user.root, OPENAI_API_KEY=SECRET))

    assert f"OPENAI_API_KEY={SECRET}" in seen["before"]  # what the fix takes away
    assert seen["failure"] is None
    assert seen["after"].strip() == "PermissionError"


OWN_FILES = """
import json, os, subprocess, sys
from acp_agent._hardening import forbid_inspection

assert forbid_inspection() is None
seen = {}
for name in ("status", "stat", "maps", "cmdline", "environ"):
    try:
        seen[name] = len(open(f"/proc/self/{name}", "rb").read())
    except OSError as exc:
        seen[name] = type(exc).__name__
seen["exe"] = os.readlink("/proc/self/exe")
read_end, write_end = os.pipe()
os.write(write_end, b"through fd")
seen["fd"] = open(f"/proc/self/fd/{read_end}", "rb").read(10).decode()
seen["os.environ"] = os.environ["OPENAI_API_KEY"]
seen["child"] = subprocess.run(
    ["cat", "/proc/self/environ"], env={"MARK": "child-own"}, capture_output=True, check=True
).stdout.decode()
print(json.dumps(seen))
"""


def test_after_hardening_we_still_read_our_own_proc_files_and_children_read_theirs(
    user: User,
) -> None:
    seen = run_python(user, OWN_FILES, user.env(user.root, OPENAI_API_KEY=SECRET))

    for name in ("status", "stat", "maps", "cmdline"):
        assert isinstance(seen[name], int) and seen[name] > 0, (name, seen[name])
    assert Path(seen["exe"]).name.startswith("python")
    assert seen["fd"] == "through fd"  # google-auth hands keys to OpenSSL this way
    assert seen["os.environ"] == SECRET  # our keys are where the providers look for them
    assert seen["child"] == "MARK=child-own\0"  # dumpable again after exec: tools work
    # As documented: the kernel's copy of our environment is root's now, even to us.
    assert seen["environ"] == "PermissionError"


def test_where_prctl_cannot_be_called_the_commands_still_run_and_the_reason_is_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from acp_agent import _hardening
    from acp_agent.cli import main

    def no_libc(name: str | None, use_errno: bool = False) -> None:
        raise OSError("libc.so.6: cannot open shared object file")

    monkeypatch.setattr("acp_agent._hardening.ctypes.CDLL", no_libc)
    assert "prctl unavailable: libc.so.6" in str(_hardening.forbid_inspection())
    assert main(["config", "path"]) == 0
    assert "config.toml" in capsys.readouterr().out

    monkeypatch.setattr("acp_agent._hardening.sys.platform", "darwin")
    assert "not on darwin" in str(_hardening.forbid_inspection())


# --- end to end: a command the model asks for ---------------------------------------------


def write_config(user: User, base_url: str) -> Path:
    config = user.root / "agent.toml"
    config.write_text(
        f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{base_url}"\n'
        'api_key_env = "MY_LLM"\nmodels = [{ id = "fake-model" }]\n'
        "[providers.fake.retry]\nmax_attempts = 1\n",
        encoding="utf-8",
    )
    return config


def tool_output(fake: FakeLLM) -> str:
    """What the command printed, as the agent sent it back to the model."""
    assert len(fake.exchanges) == 2, [e.body for e in fake.exchanges]
    tool_message = fake.exchanges[1].body["messages"][-1]
    assert tool_message["role"] == "tool"
    return json.dumps(tool_message["content"])


def assert_no_key_was_read(output: str, parent: str) -> None:
    assert SECRET not in output
    assert OTHER_SECRET not in output
    assert "command-ran" in output
    assert parent in output  # the hostile command really looked at its parent
    parent_pid = re.search(r"parent (\d+)", output)
    assert parent_pid is not None
    assert f"cat: /proc/{parent_pid[1]}/environ: Permission denied" in output


def test_a_command_run_in_the_headless_runners_terminal_reads_no_key_of_runner_or_agent(
    user: User,
) -> None:
    """`acp-agent run`: the runner (the command's parent) and the agent both hold the key."""
    home = user.directory("run-home")
    workspace = user.directory("run-workspace")
    with FakeLLM() as fake:
        config = write_config(user, fake.base_url)
        result = subprocess.run(
            [user.python, "-m", "acp_agent", "run", "--yes", "--config", str(config), PEEK_PROMPT],
            cwd=workspace,
            env=user.env(home, MY_LLM=SECRET, OPENAI_API_KEY=OTHER_SECRET),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            **user.options,
        )
        output = tool_output(fake)

    assert result.returncode == 0, result.stderr
    assert fake.exchanges[0].headers["authorization"] == f"Bearer {SECRET}"  # the agent has it
    assert_no_key_was_read(output, parent="acp_agent run")
    # The runner's other child is the agent: its environment was refused too.
    assert output.count("/environ: Permission denied") == 2, output
    assert SECRET not in result.stdout + result.stderr


def test_a_command_run_by_the_agents_own_shell_reads_no_key_of_the_agent(user: User) -> None:
    """An editor without terminals: the agent runs the command itself, as its parent."""
    home = user.directory("serve-home")
    workspace = user.directory("serve-workspace")
    with FakeLLM() as fake, tempfile.TemporaryFile("w+") as log:
        config = write_config(user, fake.base_url)
        agent = subprocess.Popen(
            [user.python, "-m", "acp_agent", "--config", str(config)],
            cwd=workspace,
            env=user.env(home, MY_LLM=SECRET, OPENAI_API_KEY=OTHER_SECRET),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            **user.options,
        )
        guard = threading.Timer(TIMEOUT, agent.kill)  # a hang fails the test, not the run
        guard.start()
        sent: list[dict[str, Any]] = []
        try:
            stop_reason = _prompt_once(agent, workspace, PEEK_PROMPT, sent)
        finally:
            guard.cancel()
            rest, _ = agent.communicate(timeout=TIMEOUT)  # stdin's end ends the agent
        assert_frames_from_agent("v1", [json.loads(line) for line in rest.splitlines()], sent)
        output = tool_output(fake)
        log.seek(0)
        stderr = log.read()

    assert stop_reason == "end_turn", stderr
    assert_no_key_was_read(output, parent="-m acp_agent --config")
    assert SECRET not in stderr


def _prompt_once(
    agent: subprocess.Popen[str], cwd: Path, text: str, sent: list[dict[str, Any]]
) -> str:
    """A client without terminals or fs: one session, one prompt, every permission granted.
    Each frame it sends is added to `sent`; each it reads is checked against the v1 schema."""
    to_agent, from_agent = agent.stdin, agent.stdout
    assert to_agent is not None and from_agent is not None
    ids = iter(range(1, 100))

    def send(message: dict[str, Any]) -> None:
        sent.append(message)
        to_agent.write(json.dumps(message) + "\n")
        to_agent.flush()

    def request(method: str, params: dict[str, Any]) -> Any:
        number = next(ids)
        send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        for line in from_agent:
            message = json.loads(line)
            assert_frames_from_agent("v1", [message], sent)
            if message.get("id") == number and "method" not in message:
                assert "error" not in message, message
                return message["result"]
            if message.get("method") == "session/request_permission":
                allow = next(
                    o for o in message["params"]["options"] if o["kind"].startswith("allow")
                )
                outcome = {"outcome": "selected", "optionId": allow["optionId"]}
                send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})
        raise AssertionError(f"the agent closed its stdout during {method}")

    request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = request("session/new", {"cwd": str(cwd), "mcpServers": []})
    prompt = [{"type": "text", "text": text}]
    answer = request("session/prompt", {"sessionId": session["sessionId"], "prompt": prompt})
    return str(answer["stopReason"])
