"""A stdlib MCP server (no SDK) that answers `tools/list` and `prompts/list` only once both
are asked: a client that lists one after the other waits forever for the first answer. It
stands for a remote server, where each round trip costs the client its full latency.
"""

from __future__ import annotations

import json
import sys

TOOLS = [{"name": "ping", "description": "Answer pong.", "inputSchema": {"type": "object"}}]
PROMPTS = [{"name": "hello", "description": "Say hello."}]
LISTS = {"tools/list": {"tools": TOOLS}, "prompts/list": {"prompts": PROMPTS}}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


held: dict[str, object] = {}  # list method -> the id of its request, not answered yet
for line in sys.stdin:
    request = json.loads(line)
    method, request_id = request.get("method"), request.get("id")
    if request_id is None:
        continue  # notifications (`notifications/initialized`)
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}, "prompts": {}},
                    "serverInfo": {"name": "lists-together", "version": "1"},
                },
            }
        )
    elif method in LISTS:
        held[method] = request_id
        if held.keys() == LISTS.keys():
            for listed, held_id in held.items():
                send({"jsonrpc": "2.0", "id": held_id, "result": LISTS[listed]})
            held.clear()
    else:
        error = {"code": -32601, "message": f"method not found: {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
