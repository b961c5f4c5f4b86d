"""Requests with a null in one field, for every served API and version: the null sweep.

Built from the schemas kafka-python keeps on its message classes (``Cls._struct``),
independently of ``protocol/nulls.py`` (which reads the same metadata to refuse them):
each case is a request of one served API and version whose arrays hold one default
element each, with exactly one string, bytes, array, array item or nested struct set to
null.  ``nullable`` says whether Kafka's schema allows that null there.
"""
from __future__ import annotations

from typing import NamedTuple

from protocol.messages import SERVED

_NULLABLE_ON_WIRE = frozenset({"string", "bytes", "records"})
ITEM = "[]"  # a path step: the array's one item


class NullCase(NamedTuple):
    api: str
    version: int
    path: tuple[str, ...]
    nullable: bool
    frame: bytes  # size-prefixed, header included

    @property
    def label(self) -> str:
        return f"{self.api} v{self.version} {'.'.join(self.path)}"


def null_cases(correlation_id: int = 7, client_id: str = "nulls") -> list[NullCase]:
    """Every null case of every served API and version kafka-python has a schema for."""
    cases = []
    for spec in sorted(SERVED.values(), key=lambda s: s.api_key):
        struct = getattr(spec.request_class, "_struct", None)
        if struct is None or not hasattr(struct, "_fields"):
            continue  # written by hand: not a kafka-python schema
        for version in range(max(spec.min_version, spec.refused_below), spec.max_version + 1):
            for path, nullable in _null_paths(struct, version):
                kwargs = _fields_of(struct, version, path)
                if "acks" in struct.fields:
                    kwargs["acks"] = 1  # answered, so every case gets an answer or a close
                message = spec.request_class[version](**kwargs)
                message.with_header(correlation_id=correlation_id, client_id=client_id)
                frame = bytes(message.encode(header=True, framed=True))
                cases.append(NullCase(spec.name, version, path, nullable, frame))
    return cases


def _present(struct, version):
    return [f for f in struct._fields or () if f.for_version_q(version)
            and not f.tagged_field_q(version)]


def _null_paths(struct, version, prefix=()):
    """(path, nullable) of every field under ``struct`` that may be written as null."""
    for field in _present(struct, version):
        path = prefix + (field.name,)
        nullable = field.nullable_for_version_q(version)
        if field.is_struct_array():
            yield path, nullable
            yield from _null_paths(field.array_of, version, path + (ITEM,))
        elif field.is_array():
            yield path, nullable
            if field.array_of.type_str in _NULLABLE_ON_WIRE:
                yield path + (ITEM,), False
        elif field.is_struct():
            yield path, nullable
            yield from _null_paths(field, version, path)
        elif field.type_str in _NULLABLE_ON_WIRE:
            yield path, nullable


def _fields_of(struct, version, null_path):
    """Keyword arguments for ``struct``'s data class: one default element per array, and
    None at ``null_path`` (relative to ``struct``; () for none)."""
    kwargs = {}
    for field in _present(struct, version):
        here = null_path[:1] == (field.name,)
        rest = null_path[1:] if here else ()
        if here and not rest:
            kwargs[field.name] = None
        elif field.is_struct_array():
            inner = rest[1:] if rest[:1] == (ITEM,) else ()
            kwargs[field.name] = [field.array_of.data_class(
                **_fields_of(field.array_of, version, inner))]
        elif field.is_array():
            kwargs[field.name] = [None if rest == (ITEM,) else _item(field.array_of)]
        elif field.is_struct():
            kwargs[field.name] = field.data_class(**_fields_of(field, version, rest))
    return kwargs


def _item(simple_field):
    """A plain value of an array's item type (the array's own default may be "null")."""
    kind = simple_field.type_str
    if kind == "string":
        return ""
    if kind in ("bytes", "records"):
        return b""
    return {"bool": False, "uuid": None, "float64": 0.0}.get(kind, 0)
