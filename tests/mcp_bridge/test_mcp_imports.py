"""The bridge's modules import one way: none imports a module that imports it back (also
not for type checking only); importing the bridge does not import the `mcp` SDK, and its
first connection loads the SDK's client without the server side the SDK's packages import
(`_sdk.py`), though what those packages export is still there when asked for."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import acp_agent.mcp_bridge

BRIDGE = Path(acp_agent.mcp_bridge.__file__).parent


def imports_within_the_bridge(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_no_module_of_the_bridge_is_on_an_import_cycle() -> None:
    graph = {path.stem: imports_within_the_bridge(path) for path in BRIDGE.glob("*.py")}

    def reaches(start: str, goal: str) -> bool:
        seen: set[str] = set()
        todo = list(graph.get(start, ()))
        while todo:
            module = todo.pop()
            if module == goal:
                return True
            if module not in seen:
                seen.add(module)
                todo.extend(graph.get(module, ()))
        return False

    assert [module for module in graph if reaches(module, module)] == []


def test_importing_the_bridge_does_not_import_the_sdk() -> None:
    probe = "import sys, acp_agent.mcp_bridge; print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


LOAD_THEN_ASK = """
import sys
from acp_agent.mcp_bridge._sdk import import_without_server_side

import_without_server_side("acp_agent.mcp_bridge._connection")
print("server side before:", "mcp.server" in sys.modules)

import mcp
from mcp import ClientSession, types
from mcp.client import Client

exports = (ClientSession, Client, types.Tool, mcp.stdio_client)
print("exports:", *(export.__name__ for export in exports))
print("server side after:", "mcp.server" in sys.modules)
try:
    mcp.no_such_name
except AttributeError as exc:
    print("missing:", exc)
"""


def test_the_packages_exports_are_there_when_a_name_is_asked_for() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOAD_THEN_ASK], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "server side before: False",
        "exports: ClientSession Client Tool stdio_client",
        "server side after: True",
        "missing: module 'mcp' has no attribute 'no_such_name'",
    ]
