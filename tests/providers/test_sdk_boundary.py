"""The vendor SDKs stay behind one module per vendor: a version bump touches one file, and
no other provider module imports an SDK at run time (annotations only)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import acp_agent.providers

PROVIDERS = Path(acp_agent.providers.__file__).parent
SDK_MODULES = {"openai": "_openai_sdk.py", "anthropic": "_anthropic_sdk.py"}


def _imports(tree: ast.Module) -> list[tuple[str, bool]]:
    """(module, only while type checking) of every import in `tree`."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, typing_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend((f"{node.module}.{alias.name}", typing_only) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return found


@pytest.mark.parametrize("path", sorted(PROVIDERS.glob("*.py")), ids=lambda p: p.name)
def test_only_the_vendors_own_module_imports_its_sdk_or_its_internals(path: Path) -> None:
    for module, typing_only in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        vendor = module.split(".", 1)[0]
        if vendor not in SDK_MODULES or path.name == SDK_MODULES[vendor]:
            continue
        assert typing_only, f"{path.name} imports {module} at run time"
        assert not any(part.startswith("_") for part in module.split(".")), (
            f"{path.name} imports the SDK internal {module}"
        )


def test_the_anthropic_version_sent_is_the_one_the_sdk_sends() -> None:
    from anthropic._constants import ANTHROPIC_API_VERSION

    from acp_agent.providers.anthropic import API_VERSION

    assert API_VERSION == ANTHROPIC_API_VERSION
