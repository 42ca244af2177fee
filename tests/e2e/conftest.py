"""End-to-end fixtures: a fake OpenAI server, a workspace, and the agent's environment.

The agent runs as a real subprocess (`python -m acp_agent`) driven by clients we did not
write; it reaches the fake server through OPENAI_BASE_URL and never the network.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import API_KEY, HELLO_TEXT, MODEL
from fake_llm import FakeLLM


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: end-to-end tests that start acp-agent as a subprocess (pytest -m e2e)"
    )


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The session cwd, holding `hello.txt`."""
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "hello.txt").write_text(HELLO_TEXT, encoding="utf-8")
    return root


@pytest.fixture
def agent_env(fake_llm: FakeLLM, tmp_path: Path) -> dict[str, str]:
    """Everything the agent process gets: a key, the fake's URL, a throwaway HOME."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "OPENAI_API_KEY": API_KEY,
        "OPENAI_BASE_URL": fake_llm.base_url,
        "ACP_AGENT_MODEL": MODEL,
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
    }


@pytest.fixture
def agent_stderr(tmp_path: Path) -> Iterator[Path]:
    """Where the agent's stderr goes; printed after the test, so a failure shows it."""
    path = tmp_path / "agent-stderr.log"
    yield path
    if path.exists():
        text = path.read_text(encoding="utf-8", errors="replace")
        print(f"--- agent stderr ({path}) ---\n{text}")
