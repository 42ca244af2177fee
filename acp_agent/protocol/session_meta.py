"""The unstable session and auth requests clients ask for (`schema.unstable.json` of v1 and
v2, the same names and params in both): `session/set_title`, `session/archive` and
`unarchive`, the `archived` filter of `session/list`, `session/status`, `auth/status`, and
the initial `configOptions` of `session/fork`. Read as plain JSON with the schema's rules,
like `providers`; the answers are built here from the agent's neutral facts.

`session/fork`'s `configOptions` is ours: the schema's `ForkSessionRequest` has no field
for initial choices, so we read the shape `session/set_config_option` takes
(`[{"configId": "model", "value": "openai/gpt-4.1"}]`) and apply each to the copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from .fields import Invalid, array, obj, optional_text, text
from .requests import SessionSetup, existing_session

ArchiveFilter: TypeAlias = Literal["exclude", "include", "only"]
ARCHIVE_FILTERS: dict[str, ArchiveFilter] = {
    "exclude": "exclude",
    "include": "include",
    "only": "only",
}
"""The schema's `SessionArchiveFilter`s; omitted and null mean `exclude`."""
AUTH_STATES = {
    "key": "authenticated",
    "missing": "unauthenticated",
    "not_needed": "not_required",
    "unknown": "unknown",
}
"""A provider's key state (`ProviderPool.key_state`) as the schema's `AuthState`."""


@dataclass(frozen=True, slots=True)
class SetTitle:
    session_id: str
    title: str


@dataclass(frozen=True, slots=True)
class ListSessions:
    cwd: str | None
    cursor: str | None
    archived: ArchiveFilter


@dataclass(frozen=True, slots=True)
class AuthStatus:
    pass


def set_title(params: dict[str, Any]) -> SetTitle:
    return SetTitle(text(params, "sessionId"), text(params, "title"))


def list_sessions(params: dict[str, Any]) -> ListSessions:
    cwd, cursor = optional_text(params, "cwd"), optional_text(params, "cursor")
    wanted = optional_text(params, "archived")
    archived = "exclude" if wanted is None else ARCHIVE_FILTERS.get(wanted)
    if archived is None:
        known = ", ".join(ARCHIVE_FILTERS)
        raise Invalid(f"archived: {str(wanted)[:40]!r} is not supported ({known})")
    return ListSessions(cwd, cursor, archived)


def auth_status(params: dict[str, Any]) -> AuthStatus:
    return AuthStatus()


def fork_session(params: dict[str, Any]) -> SessionSetup:
    """`session/fork`: what `session/resume` reads, and the choices the copy starts with."""
    choices = []
    for i, item in enumerate(array(params, "configOptions")):
        where = f"configOptions.{i}"
        choice = obj(item, where)
        config_id = text(choice, "configId", where)
        value = choice.get("value")
        if not isinstance(value, str):
            raise Invalid(f"{where}.value: must be a string (the value id of {config_id!r})")
        choices.append((config_id, value))
    return replace(existing_session(params), config_choices=tuple(choices))


# --- answers --------------------------------------------------------------------------


def status_answer(open_here: bool, busy: bool) -> dict[str, Any]:
    """`session/status`: `open` with its foreground state (v2 keeps it; v1's schema has
    only `status`, see `dialect`), or `saved`, with no state reported."""
    if not open_here:
        return {"status": "saved"}
    return {"status": "open", "state": {"state": "running" if busy else "idle"}}


def auth_answer(default_key: str, keyed: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    """`auth/status` (and `auth/status_update`): the state of the provider that answers by
    default, and each provider holding a key (`(name, is the default's)`), for display
    only: never a key, nor where it came from."""
    return {
        "state": AUTH_STATES.get(default_key, "unknown"),
        "accounts": [{"label": f"{name} API key", "active": active} for name, active in keyed],
    }
