"""MCP bridge fixtures (the helpers live in `mcp_bridge_support`)."""

from __future__ import annotations

import mcp_bridge_support  # noqa: F401  (puts tests/mcp_servers and tests/e2e on sys.path)
import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
