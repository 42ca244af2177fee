"""The house's floors, checked on the code: every module of `acp_agent/` sits on a floor, no
import points up a floor, rooms side by side on one floor do not import each other, and no
modules import each other in a circle.

An import counts wherever it is written, inside a function too (a lazy import is still a
dependency); only imports under `if TYPE_CHECKING:` do not, since they never run. Modules
named in strings (`importlib.import_module("...")`) are not followed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "acp_agent"

TOP, AGENT, WIRE_AND_SESSIONS, ENGINE, SIDE_ROOMS, GROUND = range(1, 7)
FLOOR_NAMES = {
    TOP: "top (composition root, user commands)",
    AGENT: "agent",
    WIRE_AND_SESSIONS: "protocol and sessions",
    ENGINE: "engine",
    SIDE_ROOMS: "providers, tools, mcp_bridge",
    GROUND: "ground",
}

FLOORS: dict[str, int] = {
    # The composition root and what the user runs: they read the config and wire the rest.
    "__main__": TOP,
    "cli": TOP,
    "runner": TOP,  # `acp-agent run`, a headless ACP client
    "commands": TOP,  # `models`, `config`, `doctor`, `login`, `logout`
    "agent": AGENT,
    "provider_routes": AGENT,  # the editor's `providers/*` routing, for the agent's methods
    # The ACP wire and a session's life, side by side: the dispatcher is handed its
    # handlers by cli.py, and sessions talk to the editor through their channel interface.
    "protocol": WIRE_AND_SESSIONS,
    "sessions": WIRE_AND_SESSIONS,
    "engine": ENGINE,
    "providers": SIDE_ROOMS,
    "tools": SIDE_ROOMS,
    "mcp_bridge": SIDE_ROOMS,
    "knowledge": SIDE_ROOMS,  # what the model is told of the project: instructions, skills
    # What every floor may read.
    "acp_agent": GROUND,  # the package itself: `__version__`
    "messages": GROUND,  # the neutral vocabulary
    "rpc": GROUND,
    "logs": GROUND,
    "config": GROUND,
    "_config_errors": GROUND,  # config's error wording; imports nothing of ours
    "plugins": GROUND,  # provider types from entry points: config validates their sections
    "catalog": GROUND,  # model facts that fill in what a config leaves out
    "paths": GROUND,  # where the config file and the state live
    "credentials": GROUND,  # the keys `acp-agent login` stored
    "local_addresses": GROUND,  # whether a URL names this machine
    "durations": GROUND,  # how long something ran, as people read it
    "child_env": GROUND,  # the one function that builds a child's environment (rule 9)
    "telemetry": GROUND,  # optional OpenTelemetry spans of turns, model requests, tool calls
    "_hardening": GROUND,  # keeps other processes out of our memory, called first by cli
}
"""Room (a package under acp_agent/, or a top-level module) -> floor, top floor first."""

SIDE_BY_SIDE = frozenset({"protocol", "sessions", "providers", "tools", "mcp_bridge", "knowledge"})
"""Rooms that never import another room of their own floor."""

KNOWN_CIRCLES_BEING_FIXED: tuple[frozenset[str], ...] = ()
"""Circles (their modules) that work in progress removes. Strict, like xfail: each must
still be found, so its entry goes when its fix lands."""


@dataclass(frozen=True, slots=True)
class Import:
    """One edge of the graph: `module` imports `target` in the statement `text` at `where`."""

    module: str
    target: str
    where: str
    text: str

    def __str__(self) -> str:
        return f"{self.where}: `{self.text}` ({self.module} -> {self.target})"


@cache
def read_imports(package: Path) -> tuple[Import, ...]:
    """Every import of one module of `package` by another, lazy ones included."""
    modules = {_module_name(package, path): path for path in sorted(package.rglob("*.py"))}
    found: list[Import] = []
    for module, path in modules.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        where = path.relative_to(package.parent)
        for statement in _statements(ast.parse(source, str(path))):
            written = lines[statement.lineno - 1 : statement.end_lineno]
            text = " ".join(line.strip() for line in written).replace("( ", "(").replace(", )", ")")
            names = _imported_names(statement, module, path.name == "__init__.py")
            targets = {_enclosing_module(name, modules) for name in names} - {"", module}
            for target in sorted(targets):
                found.append(Import(module, target, f"{where}:{statement.lineno}", text))
    return tuple(found)


def _module_name(package: Path, path: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _statements(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in `node`, at any depth, except under `if TYPE_CHECKING:`."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
        return
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        children: Iterable[ast.AST] = node.orelse
    else:
        children = ast.iter_child_nodes(node)
    for child in children:
        yield from _statements(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_names(
    statement: ast.Import | ast.ImportFrom, module: str, is_package: bool
) -> list[str]:
    if isinstance(statement, ast.Import):
        return [alias.name for alias in statement.names]
    base = statement.module or ""
    if statement.level:
        anchor = module if is_package else module.rpartition(".")[0]
        for _ in range(statement.level - 1):
            anchor = anchor.rpartition(".")[0]
        base = f"{anchor}.{base}" if base else anchor
    # `from . import plugins` names a module, `from .config import X` a name in one.
    return [f"{base}.{alias.name}" for alias in statement.names]


def _enclosing_module(name: str, modules: dict[str, Path]) -> str:
    """The module of ours `name` is or is in; "" when none (another package's)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def circles(package: Path) -> dict[frozenset[str], list[Import]]:
    """Each group of modules that import each other round, with the imports among them."""
    edges: dict[str, list[Import]] = {}
    for edge in read_imports(package):
        edges.setdefault(edge.module, []).append(edge)
        edges.setdefault(edge.target, [])
    return {
        group: [edge for edge in read_imports(package) if {edge.module, edge.target} <= group]
        for group in _strongly_connected(edges)
    }


def _strongly_connected(edges: dict[str, list[Import]]) -> list[frozenset[str]]:
    """Tarjan's algorithm (iterative); groups of two modules or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[frozenset[str]] = []

    def enter(node: str) -> tuple[str, Iterator[Import]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        return node, iter(edges[node])

    for start in edges:
        if start in index:
            continue
        work = [enter(start)]
        while work:
            node, pending = work[-1]
            edge = next(pending, None)
            if edge is not None:
                if edge.target not in index:
                    work.append(enter(edge.target))
                elif edge.target in stack:
                    low[node] = min(low[node], index[edge.target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = stack[stack.index(node) :]
                del stack[stack.index(node) :]
                if len(group) > 1:
                    groups.append(frozenset(group))
    return groups


def room(module: str) -> str:
    """`acp_agent.x.y` -> `x` (a package or a top-level module); the package itself is
    `acp_agent`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of(module: str) -> str:
    floor = FLOORS[room(module)]
    return f"floor {floor} ({FLOOR_NAMES[floor]})"


def placed_imports() -> list[Import]:
    """The imports between modules on a floor (the others fail the first test)."""
    return [
        edge
        for edge in read_imports(PACKAGE)
        if room(edge.module) in FLOORS and room(edge.target) in FLOORS
    ]


# --- the house's rules ---------------------------------------------------------------------


def test_every_module_is_on_a_floor() -> None:
    rooms = {room(_module_name(PACKAGE, path)) for path in PACKAGE.rglob("*.py")}

    assert sorted(rooms - FLOORS.keys()) == [], "rooms on no floor: add them to FLOORS"
    assert sorted(FLOORS.keys() - rooms) == [], "FLOORS names rooms that no longer exist"


def test_no_import_points_up_a_floor() -> None:
    upward = [
        f"{edge}: {floor_of(edge.module)} imports {floor_of(edge.target)}"
        for edge in placed_imports()
        if FLOORS[room(edge.target)] < FLOORS[room(edge.module)]
    ]

    if upward:
        pytest.fail("imports pointing up a floor:\n" + "\n".join(upward))


def test_rooms_side_by_side_do_not_import_each_other() -> None:
    across = [
        f"{edge}: {room(edge.module)} and {room(edge.target)} sit side by side"
        for edge in placed_imports()
        if room(edge.module) != room(edge.target)
        and {room(edge.module), room(edge.target)} <= SIDE_BY_SIDE
        and FLOORS[room(edge.module)] == FLOORS[room(edge.target)]
    ]

    if across:
        pytest.fail("imports between rooms side by side:\n" + "\n".join(across))


def test_no_modules_import_each_other_in_a_circle() -> None:
    found = circles(PACKAGE)
    new = [imports for group, imports in found.items() if group not in KNOWN_CIRCLES_BEING_FIXED]
    fixed = [sorted(group) for group in KNOWN_CIRCLES_BEING_FIXED if group not in found]

    if new:
        pytest.fail(
            "modules importing each other round (the imports among each group):\n"
            + "\n\n".join("\n".join(map(str, imports)) for imports in new)
        )
    assert fixed == [], f"no longer circles, remove from KNOWN_CIRCLES_BEING_FIXED: {fixed}"


# --- the reading of imports ----------------------------------------------------------------


def package_of(tmp_path: Path, sources: dict[str, str]) -> Path:
    """A package `acp_agent` of the modules `sources` (dotted name -> source)."""
    package = tmp_path / "acp_agent"
    for name, source in {"": "", **sources}.items():
        path = (
            package.joinpath(*name.split(".")).with_suffix(".py")
            if name
            else package / "__init__.py"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return package


def test_a_lazy_import_closes_a_circle_and_is_named_with_its_line(tmp_path: Path) -> None:
    package = package_of(
        tmp_path,
        {
            "sub.__init__": "",
            "sub.a": "from .. import b\n",
            "b": "import os\n\n\ndef f():\n    from .sub.a import x\n",
        },
    )

    (circle,) = circles(package).values()

    assert [str(edge) for edge in circle] == [
        "acp_agent/b.py:5: `from .sub.a import x` (acp_agent.b -> acp_agent.sub.a)",
        "acp_agent/sub/a.py:1: `from .. import b` (acp_agent.sub.a -> acp_agent.b)",
    ]


def test_an_import_for_type_checking_only_is_no_dependency(tmp_path: Path) -> None:
    package = package_of(
        tmp_path,
        {
            "a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n",
            "b": "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    from .a import x\n",
        },
    )

    assert [str(edge) for edge in read_imports(package)] == [
        "acp_agent/b.py:5: `from .a import x` (acp_agent.b -> acp_agent.a)"
    ]
    assert circles(package) == {}
