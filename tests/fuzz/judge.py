"""What one answer means: a well-formed response, or a violation.

An answer is well-formed when the response class of the request's API decodes it at the
request's version (ApiVersions: at v0 when the version asked for is not served, KIP-511),
the decoder ends exactly at the frame's end, and every error code in it (``error_code``
fields at any depth) is one of Kafka's.  Any other answer is a violation, and so is an
answer to an API key or version the broker does not serve (Kafka closes those
connections, except for ApiVersions).

``Judge.answer`` is pure apart from its cache: answers are often byte-identical (the same
refusal of the same request), so verdicts are kept by the answer's bytes.
"""
from __future__ import annotations

import dataclasses
import io

import kafka.errors

from protocol.errors import ErrorCode
from protocol.messages import SERVED

PRODUCE, API_VERSIONS = 0, 18
CACHE_MAX_ENTRIES = 50_000
CACHE_MAX_ANSWER_BYTES = 2048


def kafka_error_names() -> dict[int, str]:
    """Every error code Kafka defines that kafka-python or Raftwood knows, by number."""
    names = {code.value: code.name for code in ErrorCode}
    for value in vars(kafka.errors).values():
        errno = getattr(value, "errno", None)
        if isinstance(value, type) and isinstance(errno, int) and errno not in names:
            names[errno] = getattr(value, "message", value.__name__)
    return names


class Violation(Exception):
    """An answer that is not a well-formed Kafka response to its request."""


class Judge:
    """``answer(api_key, version, payload)`` -> the sorted error names in the answer
    (``("NONE",)`` for a clean one); raises Violation."""

    def __init__(self):
        self.error_names = kafka_error_names()
        self._cache: dict[tuple, tuple[str, ...] | str] = {}

    def answer(self, api_key: int, version: int, payload: bytes) -> tuple[str, ...]:
        key = None
        if len(payload) <= CACHE_MAX_ANSWER_BYTES:
            key = (api_key, version, payload[4:])
            verdict = self._cache.get(key)
            if verdict is not None:
                if isinstance(verdict, str):
                    raise Violation(verdict)
                return verdict
        try:
            verdict = self._judge(api_key, version, payload)
        except Violation as exc:
            verdict = str(exc)
        if key is not None and len(self._cache) < CACHE_MAX_ENTRIES:
            self._cache[key] = verdict
        if isinstance(verdict, str):
            raise Violation(verdict)
        return verdict

    def accepted(self, version: int, payload: bytes, must_refuse: dict) -> list[str]:
        """Of a well-formed Produce answer: the partitions of ``must_refuse`` ({(topic,
        partition): lie}) answered without error, as "topic-partition (lie)"."""
        body = _decode(SERVED[PRODUCE].response_class, version, payload)
        return [f"{t.name}-{p.index} ({must_refuse[(t.name, p.index)]})"
                for t in body.responses for p in t.partition_responses
                if p.error_code == 0 and (t.name, p.index) in must_refuse]

    def _judge(self, api_key: int, version: int, payload: bytes) -> tuple[str, ...]:
        spec = SERVED.get(api_key)
        if spec is None:
            raise Violation(f"answered api key {api_key}, which it does not serve")
        if not spec.serves(version):
            if api_key != API_VERSIONS:
                raise Violation(f"answered {spec.name} v{version}, a version it does not serve")
            version = 0
        try:
            body = _decode(spec.response_class, version, payload)
        except Violation:
            raise
        except Exception as exc:  # any decoder failure: the answer is malformed
            raise Violation(f"{spec.name} v{version} answer does not decode: {exc!r}") from exc
        codes = set()
        for code in _error_codes(body, version):
            name = self.error_names.get(code)
            if name is None:
                raise Violation(f"{spec.name} v{version} answer carries error code {code}, "
                                f"not one of Kafka's")
            codes.add(name)
        return tuple(sorted(codes)) or ("NONE",)


def _decode(response_class, version: int, payload: bytes):
    if not hasattr(response_class, "_struct"):  # written by hand (protocol/*_messages.py)
        return response_class.decode(payload, version, header=True)
    stream = io.BytesIO(payload)
    response_class.parse_header(stream, version=version)
    flexible = response_class.flexible_version_q(version)
    decode_from = response_class._struct.compiled_decode_from(
        version, compact=flexible, tagged=flexible, data_class=response_class)
    body, end = decode_from(memoryview(payload), stream.tell())
    if end != len(payload):
        raise Violation(f"{response_class.__name__} v{version} answer ends at byte {end} of "
                        f"its {len(payload)}-byte frame")
    return body


def _error_codes(node, version: int):
    """Every ``*error_code`` value in a decoded message, at any depth."""
    if dataclasses.is_dataclass(node):
        items = [(f.name, getattr(node, f.name)) for f in dataclasses.fields(node)]
    else:
        struct = getattr(node, "_struct", None)
        if struct is None:
            return
        items = [(name, getattr(node, name)) for name, f in struct.fields.items()
                 if f.for_version_q(version)]
    for name, value in items:
        if name == "error_code" or name.endswith("_error_code"):
            if isinstance(value, int):
                yield value
        elif isinstance(value, list):
            for item in value:
                if not isinstance(item, (int, str, bytes)):
                    yield from _error_codes(item, version)
        elif value is not None and not isinstance(value, (int, str, bytes, float, bool)):
            yield from _error_codes(value, version)
