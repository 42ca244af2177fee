"""Tracing stays out of the way: off, and OpenTelemetry not even imported, unless the
standard OTLP variables ask for it; asked for without an exporter installed, one warning
and the agent answers as ever. (The spans themselves: tests/protocol/test_protocol_telemetry.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 60


def run_echo(tmp_path: Path, **variables: str) -> tuple[subprocess.CompletedProcess[str], str]:
    config = tmp_path / "agent.toml"
    config.write_text('default_model = "echo/echo"\n\n[providers.echo]\ntype = "echo"\n')
    log_file = tmp_path / "agent.log"
    log = str(log_file)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "acp_agent",
            "run",
            "--config",
            str(config),
            "--log-file",
            log,
            "hello",
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **variables},
    )
    return done, log_file.read_text(encoding="utf-8")


def test_an_otlp_endpoint_without_an_exporter_installed_warns_once_and_the_agent_answers(
    tmp_path: Path,
) -> None:
    done, log = run_echo(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318")

    assert done.returncode == 0, done.stderr
    assert "hello" in done.stdout
    warnings = [line for line in log.splitlines() if "tracing is off" in line]
    assert len(warnings) == 1
    assert "OTEL_EXPORTER_OTLP_ENDPOINT is set" in warnings[0]
    assert "install opentelemetry-exporter-otlp-proto-http" in warnings[0]


def test_grpc_names_the_grpc_exporter(tmp_path: Path) -> None:
    _, log = run_echo(
        tmp_path,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:4317",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
    )

    assert "install opentelemetry-exporter-otlp-proto-grpc" in log


@pytest.mark.parametrize(
    "variables",
    [
        {},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_without_the_variables_or_when_disabled_opentelemetry_is_not_imported(
    variables: dict[str, str],
) -> None:
    probe = (
        "import sys\n"
        "from acp_agent import telemetry\n"
        f"print(telemetry.from_environment({variables!r}))\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT
    )

    assert done.stdout.split("\n")[:2] == ["False", "[]"], done.stderr
