"""`acp-agent login` / `logout` in-process: provider choice, hidden input, the check request
(respx), what is stored, and what is never printed."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from acp_agent.cli import main
from acp_agent.commands import login
from acp_agent.credentials import CredentialStore, credentials_path

KEY = "sk-login-0123456789abcdef0123"
MODELS = {"object": "list", "data": [{"id": "gpt-4.1", "object": "model"}]}
OPENAI_MODELS = "https://api.openai.com/v1/models"
ANTHROPIC_MODELS = "https://api.anthropic.com/v1/models"


class Terminal(io.StringIO):
    """A stdin that says it is a terminal (what the editor's login terminal gives us)."""

    def isatty(self) -> bool:
        return True


def args(provider: str | None = None, **options: Any) -> argparse.Namespace:
    values = {"provider": provider, "no_check": False, "store": "file", "config": None}
    values.update(options)
    return argparse.Namespace(**values)


def stored(env: dict[str, str]) -> dict[str, str]:
    return dict(CredentialStore(credentials_path(env)))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}


def run(env: dict[str, str], stdin: io.StringIO, **options: Any) -> tuple[int, str]:
    out = io.StringIO()
    code = login.login_command(args(**options), env, stdin, out)
    return code, out.getvalue()


@respx.mock
def test_a_piped_key_is_checked_then_stored_for_the_first_provider(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    route = respx.get(OPENAI_MODELS).respond(200, json=MODELS)
    code, out = run(env, io.StringIO(KEY + "\n"))
    assert code == 0
    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"
    assert stored(env) == {"openai": KEY}
    assert "Logged in to openai" in out
    assert KEY not in out + capsys.readouterr().err


@respx.mock
def test_anthropic_is_checked_with_its_own_headers(env: dict[str, str]) -> None:
    route = respx.get(ANTHROPIC_MODELS).respond(200, json={"data": [], "has_more": False})
    code, _ = run(env, io.StringIO(KEY), provider="anthropic")
    assert code == 0
    sent = route.calls.last.request.headers
    assert sent["x-api-key"] == KEY
    assert sent["anthropic-version"]
    assert stored(env) == {"anthropic": KEY}


@respx.mock
def test_a_refused_key_is_not_stored_and_never_printed(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    echoed = f"Incorrect API key provided: {KEY[:8]}***{KEY[-4:]} ({KEY})."
    respx.get(OPENAI_MODELS).respond(
        401, json={"error": {"message": echoed, "type": "invalid_request_error"}}
    )
    code, out = run(env, io.StringIO(KEY))
    err = capsys.readouterr().err
    assert code == 1
    assert stored(env) == {}
    assert "refused the key (HTTP 401" in err
    assert "nothing stored" in err
    for part in (KEY, KEY[:8], KEY[-6:]):
        assert part not in out + err


@respx.mock
def test_an_unreachable_api_stores_nothing_and_names_no_check(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    respx.get(OPENAI_MODELS).mock(side_effect=httpx.ConnectError("connection refused"))
    code, _ = run(env, io.StringIO(KEY))
    assert code == 1
    assert "--no-check" in capsys.readouterr().err
    assert stored(env) == {}


@respx.mock(assert_all_called=False)
def test_no_check_stores_without_a_request(env: dict[str, str]) -> None:
    route = respx.get(OPENAI_MODELS).respond(500)
    code, _ = run(env, io.StringIO(KEY), no_check=True)
    assert code == 0
    assert not route.called
    assert stored(env) == {"openai": KEY}


def test_an_empty_key_stores_nothing(env: dict[str, str]) -> None:
    code, _ = run(env, io.StringIO("\n"), no_check=True)
    assert code == 1
    assert stored(env) == {}


@respx.mock
def test_in_a_terminal_the_provider_is_chosen_and_the_key_read_hidden(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    respx.get(ANTHROPIC_MODELS).respond(200, json={"data": []})
    prompts: list[str] = []

    def hidden(prompt: str) -> str:
        prompts.append(prompt)
        return KEY

    monkeypatch.setattr(login.getpass, "getpass", hidden)
    code, out = run(env, Terminal("7\n2\n"))
    assert code == 0
    assert "1. openai" in out and "2. anthropic" in out
    assert "Type a number from 1 to 2" in out  # "7" was asked again
    assert prompts == ["API key for anthropic (input hidden): "]
    assert stored(env) == {"anthropic": KEY}
    assert KEY not in out


@respx.mock
def test_the_providers_offered_are_the_configured_ones_that_take_a_key(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.local]\ntype = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[[providers.local.models]]\nid = "m"\n'
        '[providers.offline]\ntype = "echo"\n'
    )
    route = respx.get("http://127.0.0.1:9/v1/models").respond(200, json=MODELS)
    code, _ = run(env, io.StringIO(KEY), config=str(config))
    assert code == 0
    assert route.called
    assert stored(env) == {"local": KEY}
    code, _ = run(env, io.StringIO(KEY), config=str(config), provider="offline")
    assert code == 2  # a provider that takes no key: a usage error, like any other
    assert "choose one of: local" in capsys.readouterr().err


@respx.mock
def test_a_variable_that_wins_over_the_stored_key_is_pointed_out(env: dict[str, str]) -> None:
    respx.get(OPENAI_MODELS).respond(200, json=MODELS)
    code, out = run({**env, "OPENAI_API_KEY": "sk-other-000000000000"}, io.StringIO(KEY))
    assert code == 0
    assert "OPENAI_API_KEY is set here" in out


def test_logout_forgets_one_or_all(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = CredentialStore(credentials_path(env))
    store.save("openai", KEY, use_keyring=False)
    store.save("anthropic", KEY, use_keyring=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["logout", "openai"]) == 0
    assert stored(env) == {"anthropic": KEY}
    assert main(["logout"]) == 0
    assert not store.path.exists()
    assert main(["logout"]) == 0
    out = capsys.readouterr().out
    assert "Forgot the stored key of openai." in out
    assert "No keys are stored." in out


@respx.mock
def test_the_command_line_reads_the_key_from_stdin(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    respx.get(OPENAI_MODELS).respond(200, json=MODELS)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("sys.stdin", io.StringIO(KEY + "\n"))
    assert main(["login", "openai", "--store", "file"]) == 0
    data = json.loads(credentials_path(env).read_text())
    assert data["providers"] == {"openai": {"api_key": KEY}}
    assert KEY not in capsys.readouterr().out
