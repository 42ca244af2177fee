"""`acp-agent doctor`: is everything in place for a first prompt?

    $ acp-agent doctor
    acp-agent 0.1.0, Python 3.11.9 (/usr/bin/python3)
    ok    config     /home/me/.config/acp-agent/config.toml: valid; 1 provider, 2 models ...
    ok    key        openai: OPENAI_API_KEY is set
    ok    reachable  openai: https://api.openai.com/v1/models answered HTTP 200 in 0.31s
    ok    state      /home/me/.local/state/acp-agent (writable)
    ok    mcp        fs (npx -y @modelcontextprotocol/server-filesystem .): 14 tools: ...
    ok    command    acp-agent on PATH: /home/me/.local/bin/acp-agent
    skip  acpx       not found (optional: ...)

One line per check: `ok`, `warn` (works, but look), `FAIL` (will not work) or `skip` (an
optional tool that is absent, or a check that does not apply). Exit 1 when a check failed.

A provider is reachable when its API answers an HTTP request at all: its model list, with
the key when there is one, so a refused key shows here too. Bedrock and Vertex are not
probed (their SDKs sign requests; the first prompt says what is wrong). `--offline` skips
the probes. Keys are never printed.

Each configured MCP server is started as a session would start it (in the current
directory, within `--timeout`), its tools listed, and closed again; `--offline` starts only
the stdio ones. The log file, when one is set, is checked without creating it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .. import __version__, paths
from ..config import (
    AgentConfig,
    AnthropicProviderConfig,
    ConfigError,
    EchoProviderConfig,
    OpenAIProviderConfig,
    PluginProviderConfig,
    ProviderConfig,
    load_config,
)
from ..credentials import CredentialStore, credentials_path, stored_keys
from ..logs import log_file_problem
from ._common import DEFAULT_KEY_VARIABLES, EXIT_FAILED, EXIT_OK
from ._keys import KeyState, key_status

if TYPE_CHECKING:
    from ..mcp_bridge import McpServerSpec, ServerStatus

Status = Literal["ok", "warn", "FAIL", "skip"]

OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
AZURE_API_VERSION = "2024-10-21"
KEY_VERDICTS: dict[KeyState, Status] = {
    "present": "ok",
    "not needed": "ok",
    "missing": "FAIL",
    "unknown": "warn",
}
OPENAI_TYPES = frozenset({"openai", "openai-compatible", "azure-openai"})
ACPX_NODE = (22, 13)
"""The Node version acpx declares (it runs on Node 20 too)."""


@dataclass(frozen=True, slots=True)
class Check:
    status: Status
    name: str
    detail: str

    def line(self) -> str:
        first, *rest = self.detail.splitlines() or [""]
        text = f"{self.status:<5} {self.name:<10} {first}"
        return "\n".join([text, *(" " * 17 + line for line in rest)])


def main(args: argparse.Namespace) -> int:
    print(f"acp-agent {__version__}, Python {sys.version.split()[0]} ({sys.executable})")
    failed = False
    for check in run_checks(
        getattr(args, "config", None),
        os.environ,
        offline=bool(getattr(args, "offline", False)),
        timeout=float(getattr(args, "timeout", 5.0)),
    ):
        print(check.line(), flush=True)
        failed = failed or check.status == "FAIL"
    return EXIT_FAILED if failed else EXIT_OK


def run_checks(
    config_path: str | None, env: Mapping[str, str], *, offline: bool, timeout: float
) -> list[Check]:
    checks: list[Check] = []
    config = _check_config(config_path, env, checks)
    if config is not None:
        for name, provider in config.providers.items():
            checks.append(_key_check(name, provider, env))
        if offline:
            checks.append(Check("skip", "reachable", "--offline: the providers were not asked"))
        else:
            checks += _reachability(config, env, timeout)
        checks.append(_state_check(config, env))
        if config.log_file:
            checks.append(_log_file_check(config.log_file))
        checks += _mcp_checks(config, offline=offline, timeout=timeout)
    checks += _tool_checks()
    return checks


# --- config and keys --------------------------------------------------------------------------


def _check_config(
    config_path: str | None, env: Mapping[str, str], checks: list[Check]
) -> AgentConfig | None:
    chosen = paths.config_path(config_path, env)
    try:
        config = load_config(chosen, env, stored_keys(env))
    except ConfigError as exc:
        checks.append(Check("FAIL", "config", str(exc)))
        return None
    models = len(config.model_choices())
    counts = f"{_plural(len(config.providers), 'provider')}, {_plural(models, 'model')}"
    where = chosen or f"the environment (no config file; none at {paths.user_config_path(env)})"
    checks.append(
        Check("ok", "config", f"{where}: valid; {counts}; default {config.default_choice}")
    )
    if chosen is None and all(isinstance(p, EchoProviderConfig) for p in config.providers.values()):
        checks.append(
            Check(
                "warn",
                "provider",
                "only the offline echo provider: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or "
                "write a config with: acp-agent config init PROVIDER",
            )
        )
    return config


def _key_check(name: str, provider: ProviderConfig, env: Mapping[str, str]) -> Check:
    status = key_status(name, provider, env)
    return Check(KEY_VERDICTS[status.state], "key", f"{name}: {status.detail}")


def _key_value(name: str, provider: ProviderConfig, env: Mapping[str, str]) -> str | None:
    """The key a request would carry (never printed), as the providers resolve it."""
    if not isinstance(provider, OpenAIProviderConfig | AnthropicProviderConfig):
        return None
    key = provider.resolve_api_key(env)
    if key is None and not provider.api_key_env:
        default = DEFAULT_KEY_VARIABLES.get(provider.type)
        key = env.get(default) if default else None
    if key is None:
        key = CredentialStore(credentials_path(env)).get_quietly(name)
    return key or None


# --- reachability -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Probe:
    name: str
    url: str
    headers: dict[str, str]
    with_key: bool


def _probe_for(name: str, provider: ProviderConfig, env: Mapping[str, str]) -> _Probe | Check:
    if isinstance(provider, EchoProviderConfig):
        return Check("skip", "reachable", f"{name}: offline provider, nothing to reach")
    if isinstance(provider, PluginProviderConfig):
        return Check("skip", "reachable", f"{name}: plugin type {provider.type} is not probed")
    key = _key_value(name, provider, env)
    headers = {"User-Agent": f"acp-agent/{__version__} (doctor)"}
    if isinstance(provider, AnthropicProviderConfig):
        if provider.type != "anthropic":
            return Check(
                "skip",
                "reachable",
                f"{name}: {provider.type} is not probed (the first prompt checks it)",
            )
        url = (provider.base_url or ANTHROPIC_URL).rstrip("/") + "/v1/models"
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if key:
            headers["x-api-key"] = key
        return _Probe(name, url, headers, bool(key))
    if provider.type not in OPENAI_TYPES:  # a plugin's provider
        return Check("skip", "reachable", f"{name}: a {provider.type} provider is not probed")
    return _openai_probe(name, provider, key, headers)


def _openai_probe(
    name: str, provider: OpenAIProviderConfig, key: str | None, headers: dict[str, str]
) -> _Probe:
    base = (provider.base_url or OPENAI_URL).rstrip("/")
    if provider.type == "azure-openai":
        if base.endswith("/openai/v1"):
            url = base + "/models"
        else:
            version = provider.api_version or AZURE_API_VERSION
            url = f"{base}/openai/models?api-version={version}"
        if key:
            headers["api-key"] = key
    else:
        url = base + "/models"
        if key:
            headers["Authorization"] = f"Bearer {key}"
    return _Probe(name, url, headers, bool(key))


def _reachability(config: AgentConfig, env: Mapping[str, str], timeout: float) -> list[Check]:
    planned = [_probe_for(name, provider, env) for name, provider in config.providers.items()]
    probes = [probe for probe in planned if isinstance(probe, _Probe)]
    with ThreadPoolExecutor(max_workers=min(8, len(probes) or 1)) as pool:
        answers = iter(list(pool.map(lambda probe: _ask(probe, timeout), probes)))
    return [next(answers) if isinstance(item, _Probe) else item for item in planned]


def _ask(probe: _Probe, timeout: float) -> Check:
    request = urllib.request.Request(probe.url, headers=probe.headers, method="GET")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            code = int(response.status)
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        return Check("FAIL", "reachable", f"{probe.name}: {probe.url}: {_reason(exc)}")
    took = f"in {time.monotonic() - started:.2f}s"
    where = f"{probe.name}: {probe.url}"
    if 200 <= code < 300:
        return Check("ok", "reachable", f"{where} answered HTTP {code} {took}")
    if code in (401, 403) and probe.with_key:
        return Check("FAIL", "reachable", f"{where} refused the key (HTTP {code})")
    if code >= 500:
        return Check("warn", "reachable", f"{where} answered HTTP {code} (a server error) {took}")
    return Check("ok", "reachable", f"{where} is reachable (HTTP {code}) {took}")


def _reason(exc: BaseException) -> str:
    reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, TimeoutError) or "timed out" in str(reason):
        return "no answer in time"
    if isinstance(reason, OSError) and reason.strerror:
        return f"cannot connect: {reason.strerror}"
    return f"cannot connect: {reason}"


# --- the machine ------------------------------------------------------------------------------


def _state_check(config: AgentConfig, env: Mapping[str, str]) -> Check:
    state = paths.state_dir(config.state_dir, env)
    existing = state
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if os.access(existing, os.W_OK | os.X_OK):
        created = "" if state.exists() else ", created on first use"
        return Check("ok", "state", f"{state} (writable{created})")
    return Check("FAIL", "state", f"{state}: {existing} is not writable (set state_dir)")


def _log_file_check(log_file: str) -> Check:
    problem = log_file_problem(log_file)
    if problem is None:
        return Check("ok", "log", f"{log_file} (writable)")
    return Check("warn", "log", f"{problem}: the agent logs to stderr instead")


# --- MCP servers ------------------------------------------------------------------------------


def _mcp_checks(config: AgentConfig, *, offline: bool, timeout: float) -> list[Check]:
    """One line per configured MCP server: its tools, or why it did not start."""
    from ..mcp_bridge import specs_from_config

    specs = specs_from_config(config)
    remote = [spec for spec in specs if spec.transport != "stdio"] if offline else []
    started = [spec for spec in specs if spec not in remote]
    checks = [Check("skip", "mcp", f"{spec.name}: --offline: not contacted") for spec in remote]
    if started:
        import logging

        import anyio

        # Each failure is on its line below; the bridge's own warnings would repeat it.
        logging.getLogger("acp_agent.mcp_bridge").addHandler(logging.NullHandler())
        statuses = anyio.run(_mcp_statuses, config, started, timeout)
        checks += [_mcp_check(status) for status in statuses]
    return checks


async def _mcp_statuses(
    config: AgentConfig, specs: list[McpServerSpec], connect_seconds: float
) -> list[ServerStatus]:
    from ..mcp_bridge import McpHub

    hub = McpHub(specs, cwd=Path.cwd(), config=config, connect_timeout=connect_seconds)
    async with hub:
        return hub.statuses()


def _mcp_check(status: ServerStatus) -> Check:
    if status.state != "ready":
        return Check("FAIL", "mcp", status.describe_failure())
    prefix = f"mcp__{status.name}__"  # the server is named already
    tools = ", ".join(tool.removeprefix(prefix) for tool in status.tools) or "none"
    count = _plural(len(status.tools), "tool")
    return Check("ok", "mcp", f"{status.name} ({status.where}): {count}: {tools}")


def _tool_checks() -> list[Check]:
    checks = []
    command = shutil.which("acp-agent")
    if command:
        checks.append(Check("ok", "command", f"acp-agent on PATH: {command}"))
    else:
        checks.append(
            Check(
                "warn",
                "command",
                "acp-agent is not on PATH: give editors its absolute path, or launch it with "
                "`uvx acp-llm-agent`",
            )
        )
    checks.append(_node_check())
    acpx = shutil.which("acpx") or _local_bin("acpx")
    if acpx:
        checks.append(Check("ok", "acpx", acpx))
    else:
        checks.append(
            Check("skip", "acpx", "not found (optional: a headless ACP client, `npx acpx`)")
        )
    uv = shutil.which("uv")
    if uv:
        checks.append(Check("ok", "uv", f"{_version([uv, '--version'])} ({uv})"))
    else:
        checks.append(Check("skip", "uv", "not found (optional: `uvx acp-llm-agent` needs it)"))
    return checks


def _node_check() -> Check:
    node = shutil.which("node")
    if node is None:
        return Check("skip", "node", "not found (optional: acpx and Zed's npx agents need it)")
    version = _version([node, "--version"])
    numbers = version.lstrip("v").split(".")
    try:
        major_minor = (int(numbers[0]), int(numbers[1]))
    except (IndexError, ValueError):
        return Check("warn", "node", f"{node}: cannot tell its version ({version!r})")
    if major_minor >= ACPX_NODE:
        return Check("ok", "node", f"{version} ({node})")
    wanted = ".".join(map(str, ACPX_NODE))
    return Check("ok", "node", f"{version} ({node}; acpx declares {wanted}+ but runs on it)")


def _local_bin(name: str) -> str | None:
    candidate = Path.cwd() / "node_modules" / ".bin" / name
    return str(candidate) if candidate.is_file() else None


def _version(command: list[str]) -> str:
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(no version: {exc})"
    output = (result.stdout or result.stderr).strip()
    return output.splitlines()[0] if output else "?"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
