"""`acp-agent run` fails fast and says what to do: an empty prompt and a key pasted into the
config are usage errors (exit 2, nothing started); a local server that is not running and a
proxy's HTML page instead of an event stream fail at once, without retry notices."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

TIMEOUT = 60
KEY = "sk-proj-Zx8Qv3Lm9Tt2Rr7Pp4Kk1Jj6Hh5Gg0Ff3Dd2Ss1Aa"
HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Sign in</body></html>\n"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_agent", "run", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def write_config(tmp_path: Path, base_url: str) -> Path:
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[providers.local]\ntype = "openai-compatible"\nbase_url = "{base_url}"\n'
        'models = [{ id = "m" }]\n'
    )
    return config


@pytest.mark.parametrize("prompt", ["", "   "])
def test_an_empty_prompt_is_a_usage_error(tmp_path: Path, prompt: str) -> None:
    result = run_cli(prompt, cwd=tmp_path)

    assert result.returncode == 2
    assert "acp-agent: the prompt is empty: acp-agent run" in result.stderr
    assert result.stdout == ""


def test_a_key_pasted_as_api_key_env_exits_2_without_showing_it(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[providers.x]\ntype = "openai"\napi_key_env = "{KEY}"\nmodels = [{{ id = "gpt-4.1" }}]\n'
    )

    result = run_cli("--config", str(config), "hi", cwd=tmp_path)

    assert result.returncode == 2
    assert "providers.x.api_key_env: this looks like an API key itself" in result.stderr
    assert KEY not in result.stderr + result.stdout
    assert KEY[:10] not in result.stderr + result.stdout


def test_a_local_server_that_is_not_running_fails_at_once(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"

    result = run_cli("--config", str(write_config(tmp_path, base_url)), "hi", cwd=tmp_path)

    assert result.returncode == 1
    assert (
        f"acp-agent: error: local: nothing is listening at {base_url} — is the server running?"
        in result.stderr
    )
    assert "notice:" not in result.stderr  # not one retry


class _HtmlProxy(http.server.BaseHTTPRequestHandler):
    """Answers every POST 200 with a login page, as a captive proxy does."""

    posts = 0

    def do_POST(self) -> None:
        type(self).posts += 1
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(HTML)))
        self.end_headers()
        self.wfile.write(HTML)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def html_proxy() -> Iterator[tuple[str, type[_HtmlProxy]]]:
    handler = type("Proxy", (_HtmlProxy,), {"posts": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


def test_an_html_page_instead_of_a_stream_fails_at_once_saying_what_came(
    tmp_path: Path, html_proxy: tuple[str, type[_HtmlProxy]]
) -> None:
    base_url, handler = html_proxy

    result = run_cli("--config", str(write_config(tmp_path, base_url)), "hi", cwd=tmp_path)

    assert result.returncode == 1
    assert (
        f"{base_url}/chat/completions answered HTTP 200 with text/html; charset=utf-8, "
        "not an event stream; it began: '<!DOCTYPE html>'" in result.stderr
    )
    assert "notice:" not in result.stderr
    assert handler.posts == 1
