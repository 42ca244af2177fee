"""A config file's validation errors as the user should read them: `key.path: message`, one
per line, each saying what to write instead.

pydantic's own words are kept where they already say it ("Input should be greater than
0"); where they do not, this says it: an unknown key names the nearest valid one, a model
list written as a table says to double the brackets.

The valid keys are read off the configuration's models, which `config.py` passes in: this
module imports nothing of ours, so config can import it.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

# The tags of the provider union (see `config.ProviderConfig`), which pydantic puts in a
# location after the provider's name.
_PROVIDER_TAGS = frozenset({"echo", "openai", "anthropic", "plugin"})


def describe_validation_error(
    path: Path,
    exc: ValidationError,
    data: Any,
    *,
    root: type[BaseModel],
    plugin_model: Callable[[str], type[BaseModel]],
) -> str:
    """The errors of validating `data` (the file at `path`) with the model `root`, one
    readable line each. `plugin_model(type)`: the model of a provider section whose `type`
    no built-in model has (the plugin's own settings)."""
    keys = _Keys(root, plugin_model, data)
    lines = [f"{path}: invalid configuration"]
    for error in exc.errors():
        loc = list(error["loc"])
        if len(loc) > 2 and loc[0] == "providers" and loc[2] in _PROVIDER_TAGS:
            del loc[2]  # the tag pydantic adds for the provider union
        key = ".".join(str(part) for part in loc)
        message = _message(error["type"], error["msg"], loc, key, error.get("input"), keys)
        lines.append(f"  {key}: {message}" if key else f"  {message}")
    return "\n".join(lines)


def _message(
    kind: str, text: str, loc: Sequence[str | int], key: str, given: Any, keys: _Keys
) -> str:
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), keys.at(loc[:-1]), n=1, cutoff=0.6)
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


@dataclass(frozen=True, slots=True)
class _Keys:
    """The keys valid at a place in the configuration `data`, read off its models."""

    root: type[BaseModel]
    plugin_model: Callable[[str], type[BaseModel]]
    data: Any

    def at(self, loc: Sequence[str | int]) -> list[str]:
        """The keys valid at `loc` (empty if not a table of ours)."""
        annotation: Any = self.root
        value: Any = self.data
        for part in loc:
            annotation = self._unwrap(annotation, value)
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
        model = self._unwrap(annotation, value)
        if isinstance(model, type) and issubclass(model, BaseModel):
            return list(model.model_fields)
        return []

    def _unwrap(self, annotation: Any, value: Any) -> Any:
        """`annotation` without `Annotated` and `None`; for a union of models, the member
        that validates `value` (a provider section by its `type`)."""
        while get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
        if get_origin(annotation) not in (Union, types.UnionType):
            return annotation
        members = [
            self._unwrap(arg, value) for arg in get_args(annotation) if arg is not type(None)
        ]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        if not models:
            return members[0] if len(members) == 1 else annotation
        return self._by_type(models, value)

    def _by_type(self, models: list[type[BaseModel]], value: Any) -> type[BaseModel]:
        provider_type = value.get("type") if isinstance(value, dict) else None
        for model in models:
            field = model.model_fields.get("type")
            tags = get_args(field.annotation) if field is not None else ()
            if (
                field is not None
                and get_origin(field.annotation) is Literal
                and provider_type in tags
            ):
                return model
        if isinstance(provider_type, str):
            return self.plugin_model(provider_type)
        return models[-1]


def _item(value: Any, part: str | int) -> Any:
    if isinstance(value, dict):
        return value.get(part)
    if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
        return value[part]
    return None
