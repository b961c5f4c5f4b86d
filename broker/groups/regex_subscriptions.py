"""KIP-848 regex subscriptions (``SubscribedTopicRegex``): checking a pattern and
resolving it against the topic names of the metadata image (pure, but for a cache).

Kafka compiles the pattern with RE2/J and subscribes the member to every topic whose
whole name matches it (``Matcher.matches()``).  Here Python's ``re`` does the matching,
with ``fullmatch``.  The two agree on the usual patterns (``^orders-.*``, ``a|b``,
classes, repetition, named groups); where ``re`` would accept what RE2/J refuses — the
constructs that are not regular: backreferences, lookahead and lookbehind, atomic groups,
possessive quantifiers and conditionals — the pattern is refused here too, as Kafka would
with INVALID_REGULAR_EXPRESSION.  So is an unbounded repetition nested in another
(``(a+)+``): RE2/J takes it, but ``re`` backtracks over it in exponential time, on the
event loop.  Corners left: ``re`` and RE2/J may differ in a few
escapes and Unicode classes (``\\p{...}`` is RE2/J only and is refused here).

Invariant: a resolution depends only on the pattern and the image's topic names; the
cache is dropped whenever the image's topic map is a different object (a published
image is never mutated) or holds another number of topics.
"""
from __future__ import annotations

import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Mapping

# Opcodes of constructs RE2/J does not have (it has no backtracking).
_NOT_REGULAR = {
    sre_constants.GROUPREF: "backreferences",
    sre_constants.GROUPREF_EXISTS: "conditionals",
    sre_constants.ASSERT: "lookahead or lookbehind",
    sre_constants.ASSERT_NOT: "lookahead or lookbehind",
    sre_constants.ATOMIC_GROUP: "atomic groups",
    sre_constants.POSSESSIVE_REPEAT: "possessive quantifiers",
}
MAX_PATTERN_LENGTH = 1000
MAX_CACHED_PATTERNS = 1000


class InvalidRegex(ValueError):
    """The pattern does not compile, or uses what RE2/J does not have; the message says
    which, as Kafka's INVALID_REGULAR_EXPRESSION answer does."""


_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT}


def _unregular(parsed, in_unbounded_repeat: bool = False) -> str | None:
    """The first construct of ``parsed`` (an sre parse tree) refused here, or None:
    what RE2/J does not have, and an unbounded repetition inside another (``(a+)+``),
    which RE2/J matches in linear time but ``re`` may take exponential time over."""
    for op, arg in parsed:
        if op in _NOT_REGULAR:
            return _NOT_REGULAR[op]
        unbounded = op in _REPEATS and arg[1] == sre_constants.MAXREPEAT
        if unbounded and in_unbounded_repeat:
            return "nested unbounded repetitions"
        stack = [arg]
        while stack:
            item = stack.pop()
            if isinstance(item, sre_parse.SubPattern):
                found = _unregular(item, in_unbounded_repeat or unbounded)
                if found is not None:
                    return found
            elif isinstance(item, (tuple, list)):
                stack.extend(item)
    return None


def compile_subscription(pattern: str) -> re.Pattern[str]:
    """The compiled pattern; InvalidRegex for one Kafka would refuse."""
    def invalid(reason: str) -> InvalidRegex:
        return InvalidRegex(f"SubscribedTopicRegex `{pattern}` is not a valid regular "
                            f"expression: {reason}.")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise invalid(f"longer than {MAX_PATTERN_LENGTH} characters")
    if "\\p{" in pattern or "\\P{" in pattern:
        raise invalid("Unicode classes (\\p{...}) are not served")
    try:
        parsed = sre_parse.parse(pattern)
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise invalid(str(exc)) from None
    construct = _unregular(parsed)
    if construct is not None:
        raise invalid(f"{construct} are not served (RE2 syntax, linear-time matching)")
    return compiled


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
