"""`acp-agent run` shows notices (retry waits and the like) as `notice:` lines on stderr:
it advertises `session.notices`, so they never arrive as thoughts."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

from fake_llm import FakeLLM, fake_reply

from acp_agent.runner._console import Console

TIMEOUT = 30


def test_a_notice_is_a_line_of_its_own_after_an_open_thought_or_reply() -> None:
    out, err = io.StringIO(), io.StringIO()
    shown = Console(out, err)

    shown.show_update(
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}
    )
    shown.show_update(
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "fake: server error (HTTP 500)",
            "description": "retrying in 0.5s\n(attempt 2 of 3)",
        }
    )
    shown.show_update({"sessionUpdate": "notice", "severity": "info", "title": "plain"})
    shown.show_update({"sessionUpdate": "notice", "title": ""})  # nothing to say: nothing shown
    shown.finish()

    assert out.getvalue() == ""
    assert err.getvalue() == (
        "thinking: hmm\n"
        "notice: fake: server error (HTTP 500) — retrying in 0.5s (attempt 2 of 3)\n"
        "notice: plain\n"
    )


def test_a_headless_run_prints_each_retry_wait_as_a_notice_line(tmp_path: Path) -> None:
    with FakeLLM() as fake:
        config = tmp_path / "agent.toml"
        config.write_text(
            f"""
[providers.fake]
type = "openai-compatible"
base_url = "{fake.base_url}"
retry = {{ max_attempts = 3, initial_delay = 0.01, max_delay = 0.02 }}
models = [{{ id = "fake-model" }}]
""",
            encoding="utf-8",
        )
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "acp_agent",
                "run",
                "--config",
                str(config),
                "[[status 500 2]] hi",
            ],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    assert result.returncode == 0, result.stderr
    assert result.stdout == fake_reply("hi") + "\n"
    notices = [line for line in result.stderr.splitlines() if line.startswith("notice: ")]
    assert len(notices) == 2, result.stderr
    for attempt, line in zip((2, 3), notices, strict=True):
        assert re.fullmatch(
            rf"notice: fake: .*HTTP 500.* — retrying in \d+\.\ds \(attempt {attempt} of 3\)", line
        ), line
    assert "thinking:" not in result.stderr
