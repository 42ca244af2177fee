"""The ACP schema models, loaded on first use.

Importing `acp.schema` costs about half a second (hundreds of pydantic models), so nothing
on the way to a streaming session touches it: `initialize`, the session lifecycle, prompts
and every `session/update` are read and written as plain data (`requests`, `updates`,
`options`). The other methods and the calls to the client use these models; the first
attribute read here imports them (`_schema_models`), and the server warms them in the
background once a session has started (`load`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._schema_models import *  # noqa: F403
    from ._schema_models import BaseModel


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        # Asked by the import system (`from .schema import dump` looks for `__path__`):
        # no reason to load the models.
        raise AttributeError(name)
    from . import _schema_models

    value = getattr(_schema_models, name)
    globals()[name] = value  # later reads skip this function
    return value


def load() -> None:
    """Import the models now (the server runs this in a worker thread when idle)."""
    from . import _schema_models  # noqa: F401


def dump(model: BaseModel) -> dict[str, Any]:
    """A model as the wire has it: camelCase names, no unset (None) fields."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
