"""An MCP server whose tools have input schemas that vendors (or the SDK) reject.

The SDK's server checks the schemas it sends, so this one writes its `tools/list` answer
itself, as a server written without the SDK may.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import mcp_types as types

SCHEMAS: dict[str, Any] = {
    "no_type": {"properties": {"q": {"type": "string"}}},
    "any_of": {
        "type": "object",
        "anyOf": [
            {"properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ],
    },
    "bare_array": {"type": "object", "properties": {"tags": {"type": "array"}}},
    "with_refs": {
        "type": "object",
        "properties": {"point": {"$ref": "#/$defs/Point"}},
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
    },
    "string_args": {"type": "string"},
    "fine": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "schemas", "version": "1"},
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {"name": name, "description": f"Schema {name}.", "inputSchema": schema}
                for name, schema in SCHEMAS.items()
            ]
        }
    elif method == "tools/call":
        name = request["params"]["name"]
        text = f"{name} called with {json.dumps(request['params'].get('arguments'))}"
        result = {"content": [{"type": "text", "text": text}]}
    else:
        error = {"code": types.METHOD_NOT_FOUND, "message": f"no method {method}"}
        return {"jsonrpc": "2.0", "id": ident, "error": error}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            reply = answer(json.loads(line))
            if reply is not None:
                print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
