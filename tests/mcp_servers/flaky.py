"""An MCP server that fails to start until the file named by its first argument exists."""

from __future__ import annotations

import sys
from pathlib import Path

if not Path(sys.argv[1]).exists():
    print(f"not ready: {sys.argv[1]} is missing", file=sys.stderr, flush=True)
    sys.exit(1)

from mcp.server.mcpserver import MCPServer

server = MCPServer("flaky")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


server.run()
