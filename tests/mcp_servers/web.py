"""`everything.build()` served over streamable HTTP or SSE on 127.0.0.1, as its own process.

    python web.py http|sse [name]

Binds a free port before it serves, prints the endpoint URL as its first stdout line (a
client may connect at once), and serves until it is killed. The end-to-end tests start it
beside the agent, whose MCP client then reaches it over the network stack.
"""

from __future__ import annotations

import socket
import sys

import uvicorn
from everything import build


def main() -> None:
    kind = sys.argv[1]
    name = sys.argv[2] if len(sys.argv) > 2 else "web"
    server = build(name)
    app = server.streamable_http_app() if kind == "http" else server.sse_app()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    path = "/mcp" if kind == "http" else "/sse"
    print(f"http://127.0.0.1:{port}{path}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
