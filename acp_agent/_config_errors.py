"""A config file's validation errors as the user should read them: `key.path: message`, one
per line, each saying what to write instead.

pydantic's own words are kept where they already say it ("Input should be greater than
0"); where they do not, this says it: an unknown key names the nearest valid one, a model
list written as a table says to double the brackets.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

# The tags of the provider union (see `config.ProviderConfig`), which pydantic puts in a
# location after the provider's name.
_PROVIDER_TAGS = frozenset({"echo", "openai", "anthropic", "plugin"})


def describe_validation_error(path: Path, exc: ValidationError, data: Any) -> str:
    """The errors of validating `data` (the file at `path`), one readable line each."""
    lines = [f"{path}: invalid configuration"]
    for error in exc.errors():
        loc = list(error["loc"])
        if len(loc) > 2 and loc[0] == "providers" and loc[2] in _PROVIDER_TAGS:
            del loc[2]  # the tag pydantic adds for the provider union
        key = ".".join(str(part) for part in loc)
        message = _message(error["type"], error["msg"], loc, key, error.get("input"), data)
        lines.append(f"  {key}: {message}" if key else f"  {message}")
    return "\n".join(lines)


def _message(
    kind: str, text: str, loc: Sequence[str | int], key: str, given: Any, data: Any
) -> str:
    if kind == "extra_forbidden":
        valid = _fields_at(loc[:-1], data)
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.6)
        return f"unknown key; did you mean {close[0]!r}?" if close else "unknown key"
    if (
        kind in ("tuple_type", "list_type")
        and loc
        and loc[-1] == "models"
        and isinstance(given, dict)
    ):
        return (
            f"written as a table ([{key}]); a model list is an array of tables: write "
            f"[[{key}]] (double brackets) above each model's id, name, context_window ..."
        )
    return text.removeprefix("Value error, ")


def _fields_at(loc: Sequence[str | int], data: Any) -> list[str]:
    """The keys valid at `loc` in the configuration `data` (empty if not a table of ours)."""
    from .config import AgentConfig

    annotation: Any = AgentConfig
    value: Any = data
    for part in loc:
        annotation = _unwrap(annotation, value)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return []
            annotation = field.annotation
        else:
            args = get_args(annotation)
            if get_origin(annotation) is dict and len(args) == 2:
                annotation = args[1]
            elif get_origin(annotation) in (tuple, list) and args:
                annotation = args[0]
            else:
                return []
        value = _item(value, part)
    model = _unwrap(annotation, value)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _item(value: Any, part: str | int) -> Any:
    if isinstance(value, dict):
        return value.get(part)
    if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
        return value[part]
    return None


def _unwrap(annotation: Any, value: Any) -> Any:
    """`annotation` without `Annotated` and `None`; for a union of models, the member that
    validates `value` (a provider section by its `type`)."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) not in (Union, types.UnionType):
        return annotation
    members = [_unwrap(arg, value) for arg in get_args(annotation) if arg is not type(None)]
    models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    if not models:
        return members[0] if len(members) == 1 else annotation
    return _by_type(models, value)


def _by_type(models: list[type[BaseModel]], value: Any) -> type[BaseModel]:
    provider_type = value.get("type") if isinstance(value, dict) else None
    for model in models:
        field = model.model_fields.get("type")
        tags = get_args(field.annotation) if field is not None else ()
        if field is not None and get_origin(field.annotation) is Literal and provider_type in tags:
            return model
    from . import plugins
    from .config import PluginProviderConfig

    if isinstance(provider_type, str):
        try:
            plugin = plugins.load(provider_type)
        except plugins.PluginError:
            return PluginProviderConfig
        return plugin.config_model or PluginProviderConfig
    return models[-1]
