"""Provider types from separately installed packages (entry point group
`acp_agent.providers`): configured like the built-in ones, loaded only when a config names
them, listed by `acp-agent models`, and a broken one never takes the others down.

In-process tests install the demo plugin (tests/plugins/acp_agent_demo_provider) as a
distribution on `sys.path`; one test installs it with `uv pip install` into a throwaway
virtual environment and runs `acp-agent run` through it. Everything stays offline: the
wheel is built here from the plugin's own files.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_agent import plugins
from acp_agent.commands._models import format_report, models_report
from acp_agent.config import ConfigError, PluginProviderConfig, load_config
from acp_agent.messages import Message, Stop, TextDelta, TextPart
from acp_agent.providers import ModelRequest, ProviderError, create_provider
from acp_agent.providers.pool import ProviderPool

DEMO = Path(__file__).parent / "plugins" / "acp_agent_demo_provider"
HELLO = ModelRequest(model="demo-1", system="", messages=[Message("user", [TextPart("hi")])])


# --- installing a plugin -----------------------------------------------------------------


def _distribution(project: Path) -> tuple[str, str, dict[str, str]]:
    """(name, version, entry points of our group) from a plugin's pyproject.toml."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    entry_points = meta.get("entry-points", {}).get(plugins.ENTRY_POINT_GROUP, {})
    return meta["name"], meta["version"], dict(entry_points)


def _dist_info_files(
    project: Path, name: str, version: str, entry_points: dict[str, str]
) -> dict[str, bytes]:
    """The files of an installed distribution of `project` (its packages and dist-info)."""
    stem = f"{name.replace('-', '_')}-{version}"
    files: dict[str, bytes] = {}
    for path in sorted(project.rglob("*.py")):
        files[path.relative_to(project).as_posix()] = path.read_bytes()
    points = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    files[f"{stem}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    ).encode()
    files[f"{stem}.dist-info/entry_points.txt"] = (
        f"[{plugins.ENTRY_POINT_GROUP}]\n{points}".encode()
    )
    return files


def install_on_path(target: Path, project: Path = DEMO, **overrides: Any) -> None:
    """`project` as an installed distribution in `target` (a directory on sys.path)."""
    name, version, entry_points = _distribution(project)
    entry_points.update(overrides)
    for relative, content in _dist_info_files(project, name, version, entry_points).items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def build_wheel(project: Path, out: Path) -> Path:
    """A wheel of `project`, built from its files alone (no build backend: offline)."""
    name, version, entry_points = _distribution(project)
    stem = f"{name.replace('-', '_')}-{version}"
    files = _dist_info_files(project, name, version, entry_points)
    files[f"{stem}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: acp-agent tests\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    record = []
    for relative, content in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=")
        record.append(f"{relative},sha256={digest.decode()},{len(content)}")
    record.append(f"{stem}.dist-info/RECORD,,")
    files[f"{stem}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = out / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for relative, content in files.items():
            archive.writestr(relative, content)
    return wheel


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path where tests install plugins; loaded plugins are forgotten."""
    target = tmp_path / "site"
    target.mkdir()
    monkeypatch.syspath_prepend(str(target))
    plugins.forget()
    yield target
    plugins.forget()
    for module in [name for name in sys.modules if name.startswith("acp_agent_demo_provider")]:
        del sys.modules[module]
    sys.modules.pop("broken_plugin", None)


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(text)
    return path


DEMO_CONFIG = """
[providers.hello]
type = "demo"
greeting = "Hi there"
[[providers.hello.models]]
id = "demo-1"

[providers.offline]
type = "echo"
"""


async def collect(provider: Any, request: ModelRequest = HELLO) -> list[Any]:
    async with provider.stream(request) as events:
        return [event async for event in events]


# --- in process ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_plugin_type_is_configured_like_a_built_in_one_and_streams(
    site: Path, tmp_path: Path
) -> None:
    install_on_path(site)

    config = load_config(str(write_config(tmp_path, DEMO_CONFIG)), {})
    provider_config = config.providers["hello"]
    provider = create_provider("hello", provider_config, {})
    events = await collect(provider)

    assert isinstance(provider_config, PluginProviderConfig)
    assert type(provider_config).__name__ == "DemoConfig"
    assert provider_config.model_dump()["greeting"] == "Hi there"
    text = "".join(event.text for event in events if isinstance(event, TextDelta))
    assert text.strip() == "Hi there, you said: hi"
    assert events[-1] == Stop("end_turn")


def test_a_plugin_is_imported_only_when_a_config_names_it(site: Path, tmp_path: Path) -> None:
    install_on_path(site)

    load_config(str(write_config(tmp_path, '[providers.e]\ntype = "echo"\n')), {})

    assert "acp_agent_demo_provider" not in sys.modules
    assert "demo" in plugins.installed()


def test_a_plugins_own_keys_are_checked_with_the_nearest_suggested(
    site: Path, tmp_path: Path
) -> None:
    install_on_path(site)
    path = write_config(tmp_path, DEMO_CONFIG.replace("greeting =", "greting ="))

    with pytest.raises(ConfigError) as caught:
        load_config(str(path), {})

    assert "providers.hello.greting: unknown key; did you mean 'greeting'?" in str(caught.value)


def test_an_unknown_type_lists_the_built_in_and_the_plugin_types(
    site: Path, tmp_path: Path
) -> None:
    install_on_path(site)
    path = write_config(tmp_path, DEMO_CONFIG.replace('type = "demo"', 'type = "dmeo"'))

    with pytest.raises(ConfigError) as caught:
        load_config(str(path), {})

    message = str(caught.value)
    assert "providers.hello: unknown provider type 'dmeo'; did you mean 'demo'?" in message
    assert "openai-compatible" in message
    assert "from installed plugins: demo" in message


@pytest.mark.anyio
async def test_a_broken_plugin_is_reported_and_the_other_providers_still_work(
    site: Path, tmp_path: Path
) -> None:
    (site / "broken_plugin.py").write_text("raise ImportError('needs libfoo 2')\n")
    install_on_path(site, demo="broken_plugin:plugin")

    config = load_config(str(write_config(tmp_path, DEMO_CONFIG)), {})
    pool = ProviderPool(config, {})
    broken = await pool.get("hello")  # what a session does: warm the module, then create
    echo = await pool.get("offline")

    with pytest.raises(ProviderError) as caught:
        await collect(broken)
    echoed = await collect(echo, ModelRequest("echo", "", [Message("user", [TextPart("hi")])]))

    assert "hello: cannot be used: plugin broken_plugin:plugin" in str(caught.value)
    assert "ImportError: needs libfoo 2" in str(caught.value)
    assert echoed[-1] == Stop("end_turn")
    report = models_report(config, {})
    (hello,) = [provider for provider in report["providers"] if provider["name"] == "hello"]
    assert "needs libfoo 2" in hello["plugin"]["error"]
    assert "cannot be used: plugin broken_plugin:plugin" in format_report(report)


@pytest.mark.anyio
async def test_a_plugin_whose_config_model_is_no_plugin_config_is_reported_as_broken(
    site: Path, tmp_path: Path
) -> None:
    (site / "broken_plugin.py").write_text(
        "from pydantic import BaseModel\n\n\n"
        "class Settings(BaseModel):\n    greeting: str = 'hi'\n\n\n"
        "def create(name, config, env):\n    raise AssertionError('never created')\n\n\n"
        "config_model = Settings\n"
    )
    install_on_path(site, demo="broken_plugin")

    config = load_config(str(write_config(tmp_path, DEMO_CONFIG)), {})
    with pytest.raises(ProviderError) as caught:
        await collect(create_provider("hello", config.providers["hello"], {}))
    echoed = await collect(
        create_provider("offline", config.providers["offline"], {}),
        ModelRequest("echo", "", [Message("user", [TextPart("hi")])]),
    )

    assert (
        "hello: cannot be used: plugin broken_plugin (from acp-agent-demo-provider 0.1.0): "
        "config_model must be a subclass of acp_agent.config.PluginProviderConfig"
    ) in str(caught.value)
    assert echoed[-1] == Stop("end_turn")


def test_models_lists_installed_plugin_types(site: Path, tmp_path: Path) -> None:
    install_on_path(site)

    config = load_config(str(write_config(tmp_path, DEMO_CONFIG)), {})
    text = format_report(models_report(config, {}))

    assert "hello (demo):" in text
    assert "plugin from acp-agent-demo-provider 0.1.0: loaded" in text
    assert "provider types from installed plugins: demo (acp-agent-demo-provider 0.1.0)" in text


# --- installed for real --------------------------------------------------------------------


def test_a_plugin_installed_with_uv_pip_serves_a_headless_run(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The throwaway environment sees ours (acp-agent and its dependencies) behind its own.
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_path("purelib")
    Path(purelib, "_acp_agent_parent.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    wheel = build_wheel(DEMO, tmp_path)
    install = subprocess.run(
        [uv, "pip", "install", "--offline", "--no-deps", "--python", str(python), str(wheel)],
        capture_output=True,
        text=True,
        env={**os.environ, "UV_NO_CONFIG": "1"},
    )
    assert install.returncode == 0, install.stderr
    config = write_config(tmp_path, DEMO_CONFIG)

    result = subprocess.run(
        [str(python), "-m", "acp_agent", "run", "--config", str(config), "hi from the venv"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ""},
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hi there, you said: hi from the venv"
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.metadata as m; print([d.name for d in m.distributions()])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "acp-agent-demo-provider" not in listed  # installed in the throwaway one only
