"""Reading fields of a JSON object by the schema's rules, naming the field at fault.

`where` is the path of the object read (`mcpServers.0`), "" for the params themselves; a
problem is raised as `Invalid("mcpServers.0.command: missing")`. `_meta` is never read: the
schema ignores one of the wrong type, and so do we.
"""

from __future__ import annotations

from typing import Any


class Invalid(ValueError):
    """A field the schema would refuse: its path and what is wrong with it."""


def at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid(f"{where}: must be an object")
    return value


def string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{where}: must be a string")
    return value


def text(parent: dict[str, Any], key: str, where: str = "") -> str:
    """A required string field."""
    if key not in parent:
        raise Invalid(f"{at(where, key)}: missing")
    return string(parent[key], at(where, key))


def optional_text(parent: dict[str, Any], key: str, where: str = "") -> str | None:
    value = parent.get(key)
    return None if value is None else string(value, at(where, key))


def salvaged_text(parent: dict[str, Any], key: str) -> str | None:
    """An optional string the schema reads as absent when it is not one."""
    value = parent.get(key)
    return value if isinstance(value, str) else None


def array(
    parent: dict[str, Any], key: str, where: str = "", *, required: bool = False
) -> list[Any]:
    """A list field; an optional one that is absent or null reads as empty."""
    value = parent.get(key)
    if value is None:
        if required:
            raise Invalid(f"{at(where, key)}: missing")
        return []
    if not isinstance(value, list):
        raise Invalid(f"{at(where, key)}: must be an array")
    return value
