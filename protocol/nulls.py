"""Nulls where Kafka's schema forbids them, found right after a request is decoded.

kafka-python's generated decoders read a length of -1 as None for every string, bytes
and array field, whether or not the field's schema lists it in ``nullableVersions``; a
handler then meets None where Kafka guarantees a value.  Kafka's own generated readers
refuse such a request ("non-nullable field ... was serialized as null"), and the broker
closes the connection, as for any request it cannot parse.

The check is driven by the schema kafka-python keeps on every message class
(``Cls._struct``: each field's versions, tagged versions and nullable versions), so no
API is listed by hand.  The classes written by hand (``consumer_group_messages``,
``raft_voter_messages``) and the hot decoders (``hot_requests``) refuse their own nulls
while reading and are not checked here.

A plan is built once per (class, version) and cached: a tuple of ``_Check``s, one per
field that may decode as None or holds such fields, so a request is walked only where a
null could hide.  Pure.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

# The simple types whose decoder turns length -1 into None.
_NULLABLE_ON_WIRE = frozenset({"string", "bytes", "records"})

# How a checked field's value is walked after its own null check.
_LEAF = 0        # a string or bytes: nothing inside
_ITEMS = 1       # an array of strings or bytes: no item may be null
_STRUCTS = 2     # an array of structs: each item checked with ``inner``
_STRUCT = 3      # one nested struct: checked with ``inner``
_SCALARS = 4     # an array of numbers: nothing inside

_ABSENT = object()


class _Check(NamedTuple):
    """One field of a struct: ``required`` when None is refused; ``inner`` the plan of
    its struct (``_STRUCTS``/``_STRUCT``)."""

    name: str
    required: bool
    kind: int
    inner: tuple[Any, ...]


def first_null(request_class: Any, version: int, body: Any) -> str | None:
    """The path of the first field of ``body`` that is null although the schema of
    ``request_class`` v``version`` forbids it (``topics[3].name``), or None when there is
    none.  Classes without kafka-python's schema are not checked (None)."""
    plan = _plan(request_class, version)
    return _walk(plan, body) if plan else None


@functools.cache
def _plan(request_class: Any, version: int) -> tuple[Any, ...]:
    struct = getattr(request_class, "_struct", None)
    if struct is None or not hasattr(struct, "_fields"):
        return ()
    return _struct_plan(struct, version)


def _struct_plan(struct: Any, version: int) -> tuple[Any, ...]:
    """The checks of the fields ``struct`` has in ``version`` (tagged ones included:
    absent, they take their default)."""
    checks = []
    for field in struct._fields or ():
        if not field.for_version_q(version):
            continue
        check = _field_check(field, version)
        if check is not None:
            checks.append(check)
    return tuple(checks)


def _field_check(field: Any, version: int) -> _Check | None:
    """The check of one field, or None when nothing in it can be null."""
    required = not field.nullable_for_version_q(version)
    if field.is_struct_array():
        return _Check(field.name, required, _STRUCTS, _struct_plan(field.array_of, version))
    if field.is_array():
        items = field.array_of.type_str in _NULLABLE_ON_WIRE
        return _Check(field.name, required, _ITEMS if items else _SCALARS, ())
    if field.is_struct():
        return _Check(field.name, required, _STRUCT, _struct_plan(field, version))
    if field.type_str in _NULLABLE_ON_WIRE and required:
        return _Check(field.name, True, _LEAF, ())
    return None


def _walk(plan: tuple[Any, ...], obj: Any) -> str | None:
    """The path (relative to ``obj``) of the first forbidden null under ``obj``."""
    for name, required, kind, inner in plan:
        value: Any = getattr(obj, name, _ABSENT)
        if value is _ABSENT:
            continue
        if value is None:
            if required:
                return name
            continue
        if kind == _ITEMS:
            for index, item in enumerate(value):
                if item is None:
                    return f"{name}[{index}]"
        elif kind == _STRUCTS and inner:
            for index, item in enumerate(value):
                found = _walk(inner, item)
                if found is not None:
                    return f"{name}[{index}].{found}"
        elif kind == _STRUCT and inner:
            found = _walk(inner, value)
            if found is not None:
                return f"{name}.{found}"
    return None
