"""`acp-agent run`, end to end: the commands the model runs see none of our keys, the agent does.

The runner is the client here: it starts the agent (which must get our keys, that is how
it reaches its model) and runs the agent's terminals itself (which must not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_llm import FakeLLM

TIMEOUT = 30
PLANTED = {
    "OPENAI_API_KEY": "planted-openai",
    "MY_LLM": "planted-my-llm",
    "OPENROUTER_KEY": "planted-openrouter",
    "GITHUB_TOKEN": "planted-github",
    "ACP_TEST_VISIBLE": "planted-visible",
}
SECRETS = [value for name, value in PLANTED.items() if name != "ACP_TEST_VISIBLE"]
# Every line of the environment that holds a planted value, and nothing else (the echo
# provider reports only the first lines of a tool result).
COMMAND = "env | grep planted | sort"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_agent", "run", "--yes", *args],
        cwd=cwd,
        env={**os.environ, **PLANTED},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def test_a_command_run_for_the_echo_model_sees_no_key_and_the_harmless_variables(
    tmp_path: Path,
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        '[providers.echo]\ntype = "echo"\n\n'
        '[providers.llm]\ntype = "openai-compatible"\nbase_url = "http://127.0.0.1:1/v1"\n'
        'api_key_env = "MY_LLM"\nmodels = [{ id = "m" }]\n',
        encoding="utf-8",
    )

    result = run_cli(
        "--config", str(config), f'@tool shell {{"command": "{COMMAND}"}}', cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    assert "ACP_TEST_VISIBLE=planted-visible" in result.stdout
    for secret in SECRETS:
        assert secret not in result.stdout + result.stderr


def test_the_agent_gets_its_key_while_the_command_it_runs_does_not(tmp_path: Path) -> None:
    with FakeLLM() as fake:
        config = tmp_path / "agent.toml"
        config.write_text(
            f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{fake.base_url}"\n'
            'api_key_env = "MY_LLM"\nmodels = [{ id = "fake-model" }]\n'
            "[providers.fake.retry]\nmax_attempts = 1\n",
            encoding="utf-8",
        )

        result = run_cli(
            "--config",
            str(config),
            f'[[tool shell {{"command": "{COMMAND}"}}]]',
            cwd=tmp_path,
        )

    assert result.returncode == 0, result.stderr
    assert len(fake.exchanges) == 2
    assert all(e.headers["authorization"] == "Bearer planted-my-llm" for e in fake.exchanges)
    tool_message = fake.exchanges[1].body["messages"][-1]
    assert tool_message["role"] == "tool"
    sent = json.dumps(tool_message)
    assert "ACP_TEST_VISIBLE=planted-visible" in sent
    for secret in SECRETS:
        assert secret not in sent
        assert secret not in result.stdout


def test_the_configured_policy_applies_to_the_runner_terminals(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        '[providers.echo]\ntype = "echo"\n\n[shell_environment_policy]\ninherit = "none"\n'
        f'set = {{ PATH = "{os.environ["PATH"]}", MARK = "planted-set" }}\n',
        encoding="utf-8",
    )

    result = run_cli(
        "--config", str(config), f'@tool shell {{"command": "{COMMAND}"}}', cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    assert "MARK=planted-set" in result.stdout
    assert "ACP_TEST_VISIBLE" not in result.stdout
