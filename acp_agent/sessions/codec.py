"""Plain dataclasses to JSON objects and back, derived from their declared field types.

A dataclass becomes an object of its fields, by name, in declaration order; a field whose
value is None is left out, and read back as None. A field typed as a union of several
dataclasses holds one of them tagged by `kind`, from the `Family` (a tag space: parts,
tool contents, events, records) that names them all. Tuples and lists become lists;
literals, strings, numbers, booleans and `Any` stay as they are, checked on the way in.

Reading is strict where the writer is exact: a value of the wrong type, a tag that does
not belong where it stands, or a missing field is a `RecordError` (a missing key a
`KeyError`, which the caller names). A field may be absent only when it may be None, or
when it is a boolean (read as its default). Unknown keys are ignored.

Each type's reader and writer are built once and cached: a long log decodes as fast as
hand-written code would.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from .errors import RecordError

Json = dict[str, Any]
Write = Callable[[Any], Any]
Read = Callable[[str, Any], Any]
"""Reads the JSON value found under a key (named in errors)."""

_REQUIRED: Any = object()
T = TypeVar("T")


@dataclass(frozen=True)
class Family:
    """Dataclasses sharing one `kind` tag space; `what` names one of them in errors."""

    what: str
    tags: Mapping[type[Any], str]


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    key: str
    read: Read
    when_absent: Any
    """The value of an absent key, or `_REQUIRED`."""


class Codec:
    """The writer and reader of every type reachable from the families' dataclasses.

    `renames` maps (class, field) to the JSON key it is stored under; `not_stored` names
    fields the writer leaves out (the reader then uses their defaults).
    """

    def __init__(
        self,
        families: tuple[Family, ...],
        *,
        renames: Mapping[tuple[type[Any], str], str] = {},
        not_stored: Collection[tuple[type[Any], str]] = (),
    ) -> None:
        self._families = families
        self._renames = renames
        self._not_stored = frozenset(not_stored)
        self._writers: dict[Any, Write] = {}
        self._readers: dict[Any, Read] = {}

    def write(self, value: Any, of: Any) -> Any:
        """`value`, declared as type `of`, as JSON-ready data."""
        return self.writer(of)(value)

    def read(self, data: Any, of: Any, key: str = "value") -> Any:
        """The value of type `of` that `data` holds."""
        return self.reader(of)(key, data)

    # --- writers ---------------------------------------------------------------------------

    def writer(self, of: Any) -> Write:
        return _built_once(self._writers, of, self._build_writer)

    def _build_writer(self, of: Any) -> Write:
        members = _non_none(of)
        if len(members) == 1 and members[0] is not of:
            return self.writer(members[0])  # X | None: None is left out by the object
        if len(members) > 1:
            return self._tagged_writer(members)
        origin = get_origin(of)
        if origin in (tuple, list):
            item = self.writer(get_args(of)[0])
            return lambda values: [item(v) for v in values]
        if dataclasses.is_dataclass(of):
            return self._object_writer(of)  # type: ignore[arg-type]
        return _same

    def _object_writer(self, cls: type[Any]) -> Write:
        fields = [(f.name, key, self.writer(of)) for f, key, of in self._stored_fields(cls)]

        def write(value: Any) -> Json:
            d: Json = {}
            for name, key, write_item in fields:
                item = getattr(value, name)
                if item is not None:
                    d[key] = write_item(item)
            return d

        return write

    def _tagged_writer(self, members: tuple[Any, ...]) -> Write:
        family = self._family(members)
        by_type = {cls: (family.tags[cls], self.writer(cls)) for cls in members}

        def write(value: Any) -> Json:
            found = by_type.get(type(value))
            if found is None:
                raise RecordError(f"{type(value).__name__} is none of the {family.what} kinds")
            tag, write_object = found
            return {"kind": tag, **write_object(value)}

        return write

    # --- readers ---------------------------------------------------------------------------

    def reader(self, of: Any) -> Read:
        return _built_once(self._readers, of, self._build_reader)

    def _build_reader(self, of: Any) -> Read:
        members = _non_none(of)
        if len(members) == 1 and members[0] is not of:
            inner = self.reader(members[0])
            return lambda key, value: None if value is None else inner(key, value)
        if len(members) > 1:
            return self._tagged_reader(members)
        if of is Any:
            return lambda key, value: value
        if of in _PLAIN:
            return _PLAIN[of]
        origin = get_origin(of)
        if origin is Literal:
            return _literal(frozenset(get_args(of)))
        if of is dict or origin is dict:
            return _PLAIN[dict]
        if origin in (tuple, list):
            return _list_reader(self.reader(get_args(of)[0]), get_args(of)[0], origin)
        if dataclasses.is_dataclass(of):
            return self._object_reader(of)  # type: ignore[arg-type]
        raise TypeError(f"no JSON reader for {of!r}")

    def _object_reader(self, cls: type[Any]) -> Read:
        fields = [
            _Field(f.name, key, self.reader(of), _when_absent(f, of))
            for f, key, of in self._stored_fields(cls)
        ]

        def read(key: str, d: Any) -> Any:
            if type(d) is not dict:
                raise _wrong(key, "an object", d)
            values = {}
            for field in fields:
                value = d.get(field.key, _REQUIRED)
                if value is not _REQUIRED:
                    values[field.name] = field.read(field.key, value)
                elif field.when_absent is _REQUIRED:
                    raise KeyError(field.key)
                else:
                    values[field.name] = field.when_absent
            return cls(**values)

        return read

    def _tagged_reader(self, members: tuple[Any, ...]) -> Read:
        family = self._family(members)
        by_tag = {family.tags[cls]: self.reader(cls) for cls in members}
        allowed = " or ".join(by_tag)

        def read(key: str, d: Any) -> Any:
            if type(d) is not dict:
                raise RecordError(f"{family.what} should be an object, not {type(d).__name__}")
            tag: Any = d.get("kind")
            reader = by_tag.get(tag)
            if reader is not None:
                return reader(key, d)
            if tag in family.tags.values():
                raise RecordError(f"a {tag} {family.what} cannot appear here, only {allowed}")
            raise RecordError(f"unknown {family.what} kind: {tag!r}")

        return read

    def _stored_fields(self, cls: type[Any]) -> Iterator[tuple[dataclasses.Field[Any], str, Any]]:
        """Each field of `cls` the JSON object holds: the field, its key and its type."""
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if (cls, f.name) not in self._not_stored:
                yield f, self._renames.get((cls, f.name), f.name), hints[f.name]

    def _family(self, members: tuple[Any, ...]) -> Family:
        """The first family that tags every member of a union."""
        for family in self._families:
            if all(cls in family.tags for cls in members):
                return family
        raise TypeError(f"no family tags all of {members!r}")


def _built_once(cache: dict[Any, T], of: Any, build: Callable[[Any], T]) -> T:
    """The cached reader or writer of `of`, built on first use."""
    found = cache.get(of)
    if found is None:
        found = cache[of] = build(of)
    return found


def _non_none(of: Any) -> tuple[Any, ...]:
    """A union's members other than None; (of,) for any other type."""
    if get_origin(of) in (Union, types.UnionType):
        return tuple(m for m in get_args(of) if m is not type(None))
    return (of,)


def _when_absent(field: dataclasses.Field[Any], of: Any) -> Any:
    """What an absent key reads as: None for a field that may be None, the default of a
    boolean (the version 1 reader's leniency); any other field is required."""
    if of is Any or type(None) in get_args(of):
        return None
    if of is bool and field.default is not dataclasses.MISSING:
        return field.default
    return _REQUIRED


def _same(value: Any) -> Any:
    return value


def _wrong(key: str, expected: str, value: object) -> RecordError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return RecordError(f"field {key!r} should be {expected}, not {shown}")


def _exactly(kind: type[Any], expected: str) -> Read:
    def read(key: str, value: Any) -> Any:
        if type(value) is kind:
            return value
        raise _wrong(key, expected, value)

    return read


def _number(key: str, value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _wrong(key, "a number", value)


_PLAIN: Mapping[Any, Read] = {
    str: _exactly(str, "a string"),
    int: _exactly(int, "an integer"),
    bool: _exactly(bool, "true or false"),
    float: _number,
    dict: _exactly(dict, "an object"),
}


def _literal(allowed: frozenset[str]) -> Read:
    def read(key: str, value: Any) -> Any:
        if type(value) is str and value in allowed:
            return value
        raise _wrong(key, f"one of {sorted(allowed)}", value)

    return read


def _list_reader(item: Read, item_type: Any, origin: type[Any]) -> Read:
    def read(key: str, value: Any) -> Any:
        if type(value) is not list:
            raise _wrong(key, "a list", value)
        if item_type is str:  # the common case, checked at once
            if not all(type(v) is str for v in value):
                raise _wrong(key, "a list of strings", value)
            return origin(value)
        return origin(item(key, v) for v in value)

    return read


__all__ = ["Codec", "Family", "Json"]
