"""Regex subscriptions' patterns (regex_subscriptions.py): what RE2 would refuse is
refused, with the pattern in the message; a pattern matches whole topic names; a
resolution follows the image's topics."""
from __future__ import annotations

import subprocess
import sys

import pytest

from broker.groups.regex_subscriptions import InvalidRegex, RegexResolver, compile_subscription


@pytest.mark.parametrize("pattern", [
    "^orders-.*", "orders|payments", "[a-z]+-[0-9]{2,3}", "(?P<region>eu|us)-x", "(a|b)+",
    "x{2,}", r"\d+\.log", r"\p{L}+", "(a+)+b"])
def test_re2_patterns_are_accepted(pattern):
    compile_subscription(pattern)


@pytest.mark.parametrize("pattern, why", [
    ("orders-[", "missing ]"), (r"(a)\1", "invalid escape sequence"),
    ("(?P<n>a)(?P=n)", "invalid perl operator"), ("(?=a).*", "invalid perl operator"),
    ("(?<!a)b", "invalid perl operator"), ("(?>a)", "invalid perl operator"),
    ("a++", "bad repetition operator"), ("(a)?(?(1)b|c)", "invalid perl operator"),
    ("a" * 1001, "longer than")])
def test_what_re2_refuses_is_refused_with_the_pattern_named(pattern, why):
    with pytest.raises(InvalidRegex) as refused:
        compile_subscription(pattern)
    assert why in str(refused.value) and pattern[:20] in str(refused.value)


def test_a_pattern_matches_whole_names_and_follows_the_image():
    resolver = RegexResolver()
    topics = {"orders-eu": 1, "orders-us": 1, "xorders-eu": 1, "orders": 1}
    assert resolver.resolve("orders-.*", topics) == {"orders-eu", "orders-us"}
    assert resolver.resolve("orders", topics) == {"orders"}
    newer = {**topics, "orders-apac": 1}
    assert resolver.resolve("orders-.*", newer) == {"orders-eu", "orders-us", "orders-apac"}
    newer["orders-latam"] = 1  # a map changed in place still resolves again
    assert "orders-latam" in resolver.resolve("orders-.*", newer)
    assert resolver.resolve("(a)\\1", topics) == frozenset()


def test_matching_takes_linear_time_over_a_pattern_that_backtracks_exponentially():
    """``(a|aa)*c`` over a 249-character topic name: a backtracking engine would try
    about 10^52 ways on the coordinator's event loop; RE2 answers at once.  Run in a
    child process so a regression fails on the bound instead of hanging the suite."""
    program = ("from broker.groups.regex_subscriptions import RegexResolver; "
               "print(sorted(RegexResolver().resolve('(a|aa)*c', "
               "{'a' * 249: 1, 'a' * 248 + 'c': 1})))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(["a" * 248 + "c"])
