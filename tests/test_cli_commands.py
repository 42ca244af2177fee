"""`acp-agent models`, `acp-agent config init|path` and `acp-agent doctor`, run in-process
as the command line runs them (the autouse fixture points HOME and XDG_* at tmp_path and
clears the API-key variables)."""

from __future__ import annotations

import http.server
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM

from acp_agent import paths
from acp_agent.cli import main
from acp_agent.commands import STARTER_PROVIDERS
from acp_agent.commands._doctor import run_checks
from acp_agent.config import load_config, load_config_file

TWO_PROVIDERS = """
default_model = "main/big"

[providers.main]
type = "openai"
api_key_env = "MAIN_KEY"
models = [
    { id = "small", name = "Small", context_window = 32000, images = false },
    { id = "big", context_window = 1000000, prices = { input = 2.0, output = 8.0 } },
]

[providers.claude]
type = "anthropic"
api_key_env = "CLAUDE_KEY"
models = [{ id = "claude-x", context_window = 200000, reasoning = true }]

[providers.offline]
type = "echo"
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def two_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MAIN_KEY", "sk-main-secret")
    monkeypatch.delenv("CLAUDE_KEY", raising=False)
    return write(tmp_path / "agent.toml", TWO_PROVIDERS)


# --- models -------------------------------------------------------------------------------


def test_models_lists_each_provider_with_its_key_state_and_marks_the_default(
    two_providers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "--config", str(two_providers)]) == 0
    out = capsys.readouterr().out

    assert f"configuration: {two_providers}" in out
    assert "main (openai): MAIN_KEY is set" in out
    assert "claude (anthropic): CLAUDE_KEY is not set" in out
    assert "acp-agent login claude" in out
    assert "offline (echo): none needed (offline)" in out
    lines = out.splitlines()
    assert any(line.startswith("  * main/big") and "1,000,000 tokens" in line for line in lines)
    small = next(line for line in lines if line.startswith("    main/small"))
    assert "Small" in small and "no images" in small
    assert "$2.00 in, $8.00 out per 1M" in out
    assert "sk-main-secret" not in out
    # An editor's gateway may offer more (providers/set): this list does not claim it all.
    assert "providers an editor routes or adds (ACP providers/set" in lines[-1]


def test_models_json_gives_the_same_as_data(
    two_providers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(two_providers), "models", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)

    assert report["default_model"] == "main/big"
    by_name = {provider["name"]: provider for provider in report["providers"]}
    assert by_name["main"]["key"] == {
        "state": "present",
        "detail": "MAIN_KEY is set",
        "variable": "MAIN_KEY",
    }
    assert by_name["claude"]["key"]["state"] == "missing"
    assert [m["model"] for m in by_name["main"]["models"]] == ["main/small", "main/big"]
    assert [m["default"] for m in by_name["main"]["models"]] == [False, True]
    assert by_name["claude"]["models"][0]["reasoning"] is True


def test_models_without_a_config_shows_what_the_environment_gives(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")

    assert main(["models"]) == 0
    out = capsys.readouterr().out

    assert "configuration: environment (ANTHROPIC_API_KEY)" in out
    assert "anthropic (anthropic): ANTHROPIC_API_KEY is set" in out
    assert "* anthropic/claude-sonnet" in out


def test_models_with_a_bad_config_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path / "bad.toml", 'colour = "red"\n[providers.x]\ntype = "echo"\n')

    assert main(["models", "--config", str(bad)]) == 2
    assert "colour: unknown key" in capsys.readouterr().err


# --- config init --------------------------------------------------------------------------


@pytest.mark.parametrize("provider", STARTER_PROVIDERS)
def test_config_init_writes_a_commented_starter_that_loads(
    provider: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "conf" / f"{provider}.toml"

    assert main(["config", "init", provider, "--path", str(target)]) == 0

    config = load_config_file(target)
    text = target.read_text()
    assert text.startswith(f"# Written by `acp-agent config init {provider}`")
    assert text.count("\n#") > 5  # the example's comments come along
    assert f"--config configs/{provider}.toml" not in text  # pointed at the written file
    out = capsys.readouterr().out
    assert f"wrote {target} ({provider}; default model {config.default_choice})" in out
    assert "before the first prompt:" in out


def test_config_init_refuses_to_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = write(tmp_path / "mine.toml", "# my own\n")

    assert main(["config", "init", "openai", "--path", str(target)]) == 2
    assert target.read_text() == "# my own\n"
    assert "already exists; pass --force to replace it" in capsys.readouterr().err

    assert main(["config", "init", "openai", "--path", str(target), "--force"]) == 0
    assert load_config_file(target).default_choice == "openai/gpt-4.1"


def test_config_init_without_a_path_writes_the_file_acp_agent_then_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = paths.user_config_path()
    assert not target.exists()

    assert main(["config", "init", "ollama"]) == 0

    assert target.is_file()
    assert str(target).startswith(os.environ["XDG_CONFIG_HOME"])
    assert load_config(None).source == str(target)  # read by default from now on
    # Read by default, so its usage hint names no --config.
    assert '#   acp-agent run --cwd . --yes "What does this project do?"' in target.read_text()
    capsys.readouterr()
    assert main(["config", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(target)
    assert main(["config", "init", "ollama"]) == 2


def test_config_path_says_when_no_file_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "path"]) == 0
    assert capsys.readouterr().out.startswith("none: a configuration from the environment")


def test_config_init_rejects_an_unknown_provider(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "init", "skynet"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'skynet'" in capsys.readouterr().err


# --- doctor -------------------------------------------------------------------------------


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def compatible_config(tmp_path: Path, base_url: str, key_variable: str) -> Path:
    return write(
        tmp_path / "fake.toml",
        f'[providers.local]\ntype = "openai-compatible"\nbase_url = "{base_url}"\n'
        f'api_key_env = "{key_variable}"\nmodels = [{{ id = "fake-model" }}]\n',
    )


def test_doctor_passes_against_a_reachable_server_with_its_key(
    tmp_path: Path,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LOCAL_KEY", "sk-local-secret")
    config = compatible_config(tmp_path, fake_llm.base_url, "LOCAL_KEY")

    code = main(["doctor", "--config", str(config)])
    out = capsys.readouterr().out

    assert code == 0, out
    assert f"ok    config     {config}: valid; 1 provider, 1 model" in out
    assert "ok    key        local: LOCAL_KEY is set" in out
    assert f"ok    reachable  local: {fake_llm.base_url}/models answered HTTP 200" in out
    assert "ok    state" in out
    assert "sk-local-secret" not in out
    (request,) = [e for e in fake_llm.exchanges if e.path.endswith("/models")]
    assert request.headers.get("authorization") == "Bearer sk-local-secret"


def test_doctor_fails_naming_the_variable_when_a_key_is_missing(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = compatible_config(tmp_path, fake_llm.base_url, "NOT_SET_KEY")

    code = main(["doctor", "--config", str(config)])
    out = capsys.readouterr().out

    assert code == 1
    assert "FAIL  key        local: NOT_SET_KEY is not set" in out
    assert "ok    reachable  local:" in out  # the server answers all the same


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_doctor_fails_when_the_server_refuses_the_key_or_cannot_be_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_KEY", "sk-wrong")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with socket.socket() as probe:  # a local port with nobody listening
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    try:
        refusing = compatible_config(
            tmp_path, f"http://127.0.0.1:{server.server_address[1]}/v1", "LOCAL_KEY"
        )
        refused = run_checks(str(refusing), os.environ, offline=False, timeout=5)
        gone = compatible_config(tmp_path, f"http://127.0.0.1:{closed_port}/v1", "LOCAL_KEY")
        unreachable = run_checks(str(gone), os.environ, offline=False, timeout=5)
    finally:
        server.shutdown()
        server.server_close()

    (reach,) = [check for check in refused if check.name == "reachable"]
    assert (reach.status, reach.detail.endswith("refused the key (HTTP 401)")) == ("FAIL", True)
    (reach,) = [check for check in unreachable if check.name == "reachable"]
    assert reach.status == "FAIL"
    assert "cannot connect" in reach.detail


def test_doctor_reports_a_bad_config_and_still_checks_the_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path / "bad.toml", "[providers.x]\ntype = 3\n")

    assert main(["doctor", "--config", str(bad)]) == 1
    out = capsys.readouterr().out

    assert f"FAIL  config     {bad}: invalid configuration" in out
    assert "providers.x" in out
    assert "command" in out and "node" in out  # the machine's checks still ran


def test_doctor_offline_with_no_config_warns_about_the_echo_provider(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", "--offline"]) == 0
    out = capsys.readouterr().out

    assert "ok    config     the environment (no config file;" in out
    assert "warn  provider   only the offline echo provider" in out
    assert "skip  reachable  --offline" in out
    for tool in ("node", "acpx", "uv"):
        assert any(line.split()[1:2] == [tool] for line in out.splitlines()), tool


def test_doctor_and_models_help_say_an_editors_providers_are_not_theirs_to_show(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in ("doctor", "models"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        said = " ".join(capsys.readouterr().out.split())
        assert "Providers an editor routes or adds (ACP providers/set)" in said, command
