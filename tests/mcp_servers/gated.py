"""An MCP server whose start the test controls: it writes its pid to the file named by its
first argument, then reads one line from the FIFO named by its second (opening it blocks
until the test opens the other end, so the test knows the server is starting) and only then
serves: one tool (`ping`) and one prompt (`hello`). A line `fail` makes it exit with an
error on stderr instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

marker = Path(sys.argv[1])
marker.with_suffix(".tmp").write_text(str(os.getpid()), encoding="utf-8")
marker.with_suffix(".tmp").replace(marker)  # whole or absent: the test reads it at any time
with open(sys.argv[2], encoding="utf-8") as gate:
    if gate.readline().strip() == "fail":
        print("gated: the gate said fail", file=sys.stderr, flush=True)
        sys.exit(1)

from mcp.server.mcpserver import MCPServer  # noqa: E402  (after the gate: the slow part)

server = MCPServer("gated")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


@server.prompt()
def hello(name: str) -> str:
    """Say hello to someone."""
    return f"Say hello to {name}."


server.run()
