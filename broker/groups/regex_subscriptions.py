"""KIP-848 regex subscriptions (``SubscribedTopicRegex``): checking a pattern and
resolving it against the topic names of the metadata image (pure, but for a cache).

Kafka compiles the pattern with RE2/J and subscribes the member to every topic whose
whole name matches it (``Matcher.matches()``).  Here RE2 itself does both (the
``google-re2`` binding, ``fullmatch``): the same syntax, so what RE2/J refuses —
backreferences, lookahead and lookbehind, atomic groups, possessive quantifiers,
conditionals — is refused with INVALID_REGULAR_EXPRESSION as Kafka refuses it, and
matching takes time linear in the topic name whatever the pattern.  That matters: any
member of a group may send a pattern and it runs on the coordinator's event loop, where
a backtracking engine (Python's ``re``) takes exponential time over ``(a|aa)*c`` and a
long topic name.

Invariant: a resolution depends only on the pattern and the image's topic names; the
cache is dropped whenever the image's topic map is a different object (a published
image is never mutated) or holds another number of topics.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import re2  # type: ignore[import-untyped]

MAX_PATTERN_LENGTH = 1000
MAX_CACHED_PATTERNS = 1000

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the client's error, not a broker log line


class InvalidRegex(ValueError):
    """The pattern does not compile as RE2 syntax; the message says why, as Kafka's
    INVALID_REGULAR_EXPRESSION answer does."""


def compile_subscription(pattern: str) -> Any:
    """The compiled RE2 pattern; InvalidRegex for one Kafka would refuse."""
    def invalid(reason: str) -> InvalidRegex:
        return InvalidRegex(f"SubscribedTopicRegex `{pattern}` is not a valid regular "
                            f"expression: {reason}.")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise invalid(f"longer than {MAX_PATTERN_LENGTH} characters")
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "does not compile"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise invalid(f"{reason} (RE2 syntax)") from None


class RegexResolver:
    """Patterns → the topic names they match in one image (event-loop only).

    ``resolve`` is called on every heartbeat of a regex member; answers are cached per
    image topic map (published images are never mutated), so a new image — a topic
    created or deleted — resolves again and anything else costs a dictionary look-up."""

    def __init__(self) -> None:
        self._topics: Mapping | None = None
        self._count = 0
        self._resolved: dict[str, frozenset[str]] = {}

    def resolve(self, pattern: str, topics: Mapping) -> frozenset[str]:
        """The names in ``topics`` that ``pattern`` (already checked) matches whole;
        empty for a pattern that no longer compiles."""
        if topics is not self._topics or len(topics) != self._count \
                or len(self._resolved) >= MAX_CACHED_PATTERNS:
            self._topics, self._count, self._resolved = topics, len(topics), {}
        found = self._resolved.get(pattern)
        if found is None:
            try:
                compiled = compile_subscription(pattern)
            except InvalidRegex:
                found = frozenset()
            else:
                found = frozenset(name for name in topics if compiled.fullmatch(name))
            self._resolved[pattern] = found
        return found
