"""What `--log-level debug` and `info` show of a run: every frame (kind, method, id, size,
the start of its body), each turn's start and end, each model request (provider, model,
status, latency, tokens), every retry and failure, and each tool call; never a key.

Each test runs `acp-agent run` as a user would, against the fake OpenAI-compatible server
scripted to fail (`[[status 500 N]]`), and reads the log file the agent wrote.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM

TIMEOUT = 60
KEY = "sk-test-Qw7Er5Ty3Ui1Op9As8Df"
AGENT_RUN = (sys.executable, "-m", "acp_agent", "run", "--yes")


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def write_config(tmp_path: Path, base_url: str, *, max_attempts: int = 5) -> Path:
    config = tmp_path / "agent.toml"
    config.write_text(
        f"""default_model = "fake/fake-model"

[providers.fake]
type = "openai-compatible"
base_url = "{base_url}"
api_key = "{KEY}"
models = [{{ id = "fake-model" }}]

[providers.fake.retry]
initial_delay = 0.01
max_attempts = {max_attempts}
""",
        encoding="utf-8",
    )
    return config


def run_logged(
    tmp_path: Path, config: Path, level: str, *prompt: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """`acp-agent run` at `level`; its result and the log it wrote."""
    log_file = tmp_path / "agent.log"
    log = str(log_file)
    done = subprocess.run(
        [*AGENT_RUN, "--config", str(config), "--log-level", level, "--log-file", log, *prompt],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    return done, log_file.read_text(encoding="utf-8")


def lines_with(log: str, text: str) -> list[str]:
    return [line for line in log.splitlines() if text in line]


def test_debug_shows_frames_the_turn_and_each_model_request_with_its_retries(
    tmp_path: Path, fake: FakeLLM
) -> None:
    config = write_config(tmp_path, fake.base_url)

    done, log = run_logged(tmp_path, config, "debug", "hello [[status 500 3]]")

    assert done.returncode == 0, done.stderr
    assert "Fake reply to: hello" in done.stdout
    prompt_in = lines_with(log, "frame in: request session/prompt id ")
    assert len(prompt_in) == 1 and '"method":"session/prompt"' in prompt_in[0]
    assert re.search(r"frame out: response id \d+ \(result\), \d+ bytes: .*end_turn", log)
    assert lines_with(log, "frame out: notification session/update, ")
    retried = lines_with(log, "retrying in")
    assert len(retried) == 3
    assert all(
        " INFO " in line and "model request to fake (fake-model)" in line and "HTTP 500" in line
        for line in retried
    )
    (answered,) = lines_with(log, "fake-model), attempt 4 of 5: ok in ")
    assert re.search(r"stop end_turn, tokens \d+ in, \d+ out", answered)
    assert lines_with(log, "turn started in session sess_")
    (ended,) = lines_with(log, "turn ended in session sess_")
    assert re.search(r": end_turn after \d+\.\d+s \(model requests: 1, tool calls: 0\)", ended)


def test_a_frame_body_is_cut_short(tmp_path: Path, fake: FakeLLM) -> None:
    config = write_config(tmp_path, fake.base_url)

    done, log = run_logged(tmp_path, config, "debug", "long " * 500)

    assert done.returncode == 0, done.stderr
    (prompt_in,) = lines_with(log, "frame in: request session/prompt")
    assert re.search(r"\d{4} bytes: ", prompt_in)
    assert len(prompt_in.split(" bytes: ", 1)[1]) <= 200


def test_the_key_in_the_config_never_reaches_the_log(tmp_path: Path, fake: FakeLLM) -> None:
    config = write_config(tmp_path, fake.base_url, max_attempts=2)
    # The prompt quotes the key, so frames (the prompt, the title, the reply) carry it, cut
    # at any point; and the fake's 401 quotes the key it was sent, as OpenAI's does.
    quoted = f"my key is {KEY} " + "x" * 150

    _, log = run_logged(tmp_path, config, "debug", quoted)
    _, refused = run_logged(tmp_path, config, "debug", f"{quoted} [[status 401]]")

    assert "my key is [redacted]" in log
    assert lines_with(refused, "HTTP 401")
    for text in (log, refused):
        assert KEY not in text
        assert KEY[:12] not in text  # nor half of it, cut off with a frame's body


def test_a_request_that_fails_for_good_is_a_warning(tmp_path: Path, fake: FakeLLM) -> None:
    config = write_config(tmp_path, fake.base_url, max_attempts=2)

    done, log = run_logged(tmp_path, config, "debug", "hello [[status 500 5]]")

    assert done.returncode != 0
    (gave_up,) = lines_with(log, "attempt 2 of 2")
    assert (
        " WARNING " in gave_up and "HTTP 500" in gave_up and "gave up after 2 attempts" in gave_up
    )
    (ended,) = lines_with(log, "turn ended in session")
    assert "failed (ProviderUnavailable" in ended


def test_debug_logs_each_tool_call(tmp_path: Path, fake: FakeLLM) -> None:
    (tmp_path / "notes.txt").write_text("some notes\n", encoding="utf-8")
    config = write_config(tmp_path, fake.base_url)

    done, log = run_logged(
        tmp_path, config, "debug", 'read [[tool read_file {"path": "notes.txt"}]]'
    )

    assert done.returncode == 0, done.stderr
    assert re.search(r"tool call read_file \(\S+\): done after \d+\.\d+s", log)
    assert re.search(r"turn ended .*: end_turn .*\(model requests: 2, tool calls: 1\)", log)


def test_info_shows_retries_but_no_frames_turns_or_requests_that_went_well(
    tmp_path: Path, fake: FakeLLM
) -> None:
    config = write_config(tmp_path, fake.base_url)

    done, log = run_logged(tmp_path, config, "info", "hello [[status 500 2]]")

    assert done.returncode == 0, done.stderr
    assert len(lines_with(log, "retrying in")) == 2
    assert not lines_with(log, "frame ")
    assert not lines_with(log, "turn started")
    assert not lines_with(log, ": ok in ")
