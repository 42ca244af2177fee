"""What ships: the package metadata, the ACP registry entry, the license, the npm lock, and
the README's promises that code can check (its opening commands, the default models)."""

from __future__ import annotations

import json
import os
import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import acp_agent
from acp_agent.commands import STARTER_PROVIDERS
from acp_agent.config import DEFAULT_ANTHROPIC_MODEL, DEFAULT_OPENAI_MODEL

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT: dict[str, Any] = PYPROJECT["project"]
REGISTRY_ENTRY = ROOT / "registry" / PROJECT["name"]
AGENT_JSON: dict[str, Any] = json.loads((REGISTRY_ENTRY / "agent.json").read_text())
ALLOWED_PAINT = {"currentcolor", "none", "inherit"}


# --- the package --------------------------------------------------------------------------


def test_the_distribution_is_acp_llm_agent_and_installs_the_acp_agent_command() -> None:
    assert PROJECT["name"] == "acp-llm-agent"
    assert PROJECT["scripts"]["acp-agent"] == "acp_agent.cli:main"
    # `uvx acp-llm-agent` (and the registry's `uvx <package>`) runs the script named so.
    assert PROJECT["scripts"][PROJECT["name"]] == "acp_agent.cli:main"


def test_the_package_version_is_the_one_the_code_reports() -> None:
    assert PROJECT["version"] == acp_agent.__version__


def _runtime_requirements() -> list[Requirement]:
    extras = PROJECT.get("optional-dependencies", {}).values()
    return [
        Requirement(text) for text in [*PROJECT["dependencies"], *(r for e in extras for r in e)]
    ]


def _locked_versions() -> dict[str, str]:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return {canonicalize_name(entry["name"]): entry["version"] for entry in lock["package"]}


@pytest.mark.parametrize("requirement", _runtime_requirements(), ids=str)
def test_every_runtime_dependency_has_an_upper_bound_the_locked_version_satisfies(
    requirement: Requirement,
) -> None:
    # A new major (a new minor of a 0.x) of a dependency may break us: CI tests the locked
    # one, and users get no version CI never ran.
    bounded = any(spec.operator in ("<", "<=", "==", "~=", "===") for spec in requirement.specifier)
    locked = _locked_versions().get(canonicalize_name(requirement.name))

    assert bounded, f"{requirement} has no upper bound"
    assert locked is not None, f"{requirement.name} is not in uv.lock: run `uv lock`"
    assert requirement.specifier.contains(locked, prereleases=True), (
        f"uv.lock has {requirement.name} {locked}, outside {requirement.specifier}: run `uv lock`"
    )


def test_the_wheel_ships_the_example_configs_config_init_copies() -> None:
    force_include = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert force_include == {"configs": "acp_agent/_configs"}
    shipped = {path.stem for path in (ROOT / "configs").glob("*.toml")}
    assert set(STARTER_PROVIDERS) == shipped


# --- the license --------------------------------------------------------------------------


def test_the_license_file_is_the_mit_license_pyproject_names() -> None:
    text = (ROOT / "LICENSE").read_text()

    assert PROJECT["license"] == "MIT"
    assert PROJECT["license-files"] == ["LICENSE"]
    assert text.startswith("MIT License\n")
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    assert re.search(r"^Copyright \(c\) \d{4} \S", text, re.MULTILINE)


# --- the ACP registry entry ---------------------------------------------------------------


def test_the_registry_entry_has_the_fields_the_registry_requires() -> None:
    assert set(AGENT_JSON) == {
        "id",
        "name",
        "version",
        "description",
        "repository",
        "authors",
        "license",
        "distribution",
    }
    assert re.fullmatch(r"[a-z][a-z0-9-]*", AGENT_JSON["id"])
    assert AGENT_JSON["id"] == REGISTRY_ENTRY.name  # the registry wants folder == id
    assert AGENT_JSON["name"] and AGENT_JSON["description"]
    assert AGENT_JSON["authors"] and all(isinstance(a, str) for a in AGENT_JSON["authors"])
    assert AGENT_JSON["license"] == PROJECT["license"]
    assert AGENT_JSON["repository"] == PROJECT["urls"]["Repository"]


def test_the_registry_entry_version_is_the_package_version_and_pins_it() -> None:
    uvx = AGENT_JSON["distribution"]["uvx"]

    assert AGENT_JSON["version"] == PROJECT["version"] == acp_agent.__version__
    assert set(AGENT_JSON["distribution"]) == {"uvx"}
    assert set(uvx) <= {"package", "args", "env"}
    assert uvx["package"] == f"{PROJECT['name']}=={PROJECT['version']}"
    assert uvx["args"] == []  # no arguments: the command serves ACP on stdio


def test_the_registry_icon_is_a_16_pixel_square_drawn_in_currentcolor_only() -> None:
    text = (REGISTRY_ENTRY / "icon.svg").read_text()
    root = ET.fromstring(text)

    assert "<!--" not in text  # the registry rejects comments (they break its MDX)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("16", "16", "0 0 16 16")
    paints = [
        (element.tag, name, element.get(name))
        for element in root.iter()
        for name in ("fill", "stroke", "color", "stop-color")
        if element.get(name) is not None
    ]
    assert paints
    assert all(str(value).strip().lower() in ALLOWED_PAINT for _, _, value in paints), paints
    assert any(str(value).strip().lower() == "currentcolor" for _, _, value in paints)
    assert all(element.get("style") is None for element in root.iter())
    assert not [element for element in root.iter() if element.tag.endswith("style")]


# --- the npm lock -------------------------------------------------------------------------


def test_the_npm_lock_has_an_entry_for_every_dependency_so_npm_ci_accepts_it() -> None:
    """`npm ci` refuses a lock missing any declared dependency, optional platform packages
    included, even ones for other platforms (`npm install` drops those the registry does
    not serve: add them back, see CONTRIBUTING)."""
    packages: dict[str, Any] = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    missing = []
    for location, entry in packages.items():
        declared = {
            **entry.get("dependencies", {}),
            **entry.get("optionalDependencies", {}),
            **entry.get("devDependencies", {}),
        }
        for name in declared:
            if not _resolves(packages, location, name):
                missing.append(f"{location or '(root)'} -> {name}")
    assert missing == []


def _resolves(packages: dict[str, Any], location: str, name: str) -> bool:
    """Node's lookup: `<location>/node_modules/<name>`, then each parent's, then the root's."""
    base = location
    while True:
        candidate = f"{base}/node_modules/{name}" if base else f"node_modules/{name}"
        if candidate in packages:
            return True
        if not base:
            return False
        base = base.rsplit("/node_modules/", 1)[0] if "/node_modules/" in base else ""


# --- the README ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def readme() -> str:
    return (ROOT / "README.md").read_text()


def test_the_readme_opens_with_a_run_command_and_the_test_command_ci_runs(readme: str) -> None:
    opening = re.search(r"```sh\n(.*?)\n```", readme, re.DOTALL)
    assert opening is not None
    run, tests = opening.group(1).splitlines()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()

    assert run == 'python3 -m pip install uv && uv run --no-dev acp-agent run "Say hello"'
    assert tests in ci  # exactly the command CI runs


def test_the_readme_names_the_default_models_the_code_uses(readme: str) -> None:
    rows = {
        variable: next(line for line in readme.splitlines() if line.startswith(f"| `{variable}`"))
        for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    assert f"model `{DEFAULT_OPENAI_MODEL}`" in rows["OPENAI_API_KEY"]
    assert f"model `{DEFAULT_ANTHROPIC_MODEL}`" in rows["ANTHROPIC_API_KEY"]


def test_the_readme_names_the_registry_entry_and_the_install_commands(readme: str) -> None:
    assert f"registry/{PROJECT['name']}" in readme
    for command in (
        f"uvx {PROJECT['name']}",
        f"pipx install {PROJECT['name']}",
        f"pip install {PROJECT['name']}",
    ):
        assert command in readme
    assert '"command": "uvx"' in readme and f'"args": ["{PROJECT["name"]}"]' in readme


# --- the sdist ----------------------------------------------------------------------------

CACHE_PARTS = {".hypothesis", ".pytest_cache", "__pycache__", "node_modules", ".venv"}
_USERS_ENVIRONMENT = dict(os.environ)
"""Read at import, before the autouse fixture moves HOME: where uv's cache really is."""


def test_the_sdist_holds_no_test_caches_or_environments(tmp_path: Path) -> None:
    """After a test run (`.hypothesis/`, `__pycache__/` ...) the sdist still ships only the
    project. Built offline by uv (the build backend from its cache: no network)."""
    import shutil
    import subprocess
    import tarfile

    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    # A cache of each kind in the tree, as a test run leaves them.
    planted = ROOT / ".hypothesis" / "examples" / "planted-by-test-packaging"
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text("x")
    cache = subprocess.run(
        [uv, "cache", "dir"], env=_USERS_ENVIRONMENT, capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        built = subprocess.run(
            [uv, "build", "--sdist", "--offline", "--out-dir", str(tmp_path)],
            cwd=ROOT,
            env={**os.environ, "UV_CACHE_DIR": cache},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        planted.unlink()
    if built.returncode != 0 and "network was disabled" in built.stderr:
        pytest.skip(f"the build backend is not in uv's cache: {built.stderr.strip()[-200:]}")
    assert built.returncode == 0, built.stderr
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    assert any(name.endswith("/acp_agent/cli.py") for name in names)
    shipped_caches = [name for name in names if CACHE_PARTS & set(Path(name).parts)]
    assert shipped_caches == []
