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

With an authorizer, a member is subscribed only to the matching topics its principal
may Describe (Kafka's ``filterTopicDescribeAuthorizedTopics``): ``TopicAccess`` is that
principal's view, kept on the member from its last heartbeat.  Kafka resolves a pattern
once per group, with the principal of the member whose heartbeat refreshed it, and
refreshes when topics are created or every ``group.consumer.regex.refresh.interval.ms``
(10 minutes); here each member's pattern is filtered with its own principal against the
current image, so an ACL granted or removed counts at the group's next heartbeat.

Invariant: a resolution depends only on the pattern, the image's topic names and, when
filtered, the principal, its host and the image's ACLs; the cache is dropped whenever
the image's topic map is a different object (a published image is never mutated, and
every new image, an ACL change included, brings a new topic map) or holds another
number of topics.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
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


class TopicAccess:
    """What one principal, connected from one host, may Describe: ``key`` names it (the
    cache key), ``may_describe(topic)`` asks the authorizer against the current ACLs."""

    __slots__ = ("key", "may_describe")

    def __init__(self, key: Hashable, may_describe: Callable[[str], bool]):
        self.key = key
        self.may_describe = may_describe


UNFILTERED = TopicAccess("", lambda topic: True)  # no authorizer, or a super user


class RegexResolver:
    """Patterns → the topic names they match in one image (event-loop only).

    ``resolve`` is called on every heartbeat of a regex member; answers are cached per
    image topic map (published images are never mutated), so a new image — a topic
    created or deleted — resolves again and anything else costs a dictionary look-up."""

    def __init__(self) -> None:
        self._topics: Mapping | None = None
        self._count = 0
        self._resolved: dict[str, frozenset[str]] = {}
        self._filtered: dict[tuple[str, Hashable], frozenset[str]] = {}

    def resolve(self, pattern: str, topics: Mapping,
                access: TopicAccess | None = None) -> frozenset[str]:
        """The names in ``topics`` that ``pattern`` (already checked) matches whole and,
        with ``access``, that its principal may Describe; empty for a pattern that no
        longer compiles."""
        if topics is not self._topics or len(topics) != self._count \
                or len(self._resolved) + len(self._filtered) >= MAX_CACHED_PATTERNS:
            self._topics, self._count = topics, len(topics)
            self._resolved, self._filtered = {}, {}
        matched = self._matched(pattern, topics)
        if access is None or access is UNFILTERED or not matched:
            return matched
        found = self._filtered.get((pattern, access.key))
        if found is None:
            found = frozenset(name for name in matched if access.may_describe(name))
            self._filtered[(pattern, access.key)] = found
        return found

    def _matched(self, pattern: str, topics: Mapping) -> frozenset[str]:
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
