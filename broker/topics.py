"""Topic names (Kafka's rules for what a topic may be called) and the topic config names
Raftwood acts on, with the throttled-replica lists' validation; imports nothing of the
broker, so the config layer and every room may use it."""
from __future__ import annotations

import re

from storage.config import CLEANUP_POLICIES, LogConfig

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
# Kafka's internal topics (Topic.INTERNAL_TOPICS): written only by the broker itself (the
# group coordinator; transactions are not served), never by a client Produce, and never
# deleted.  Raftwood creates only __consumer_offsets.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state",
                             "__share_group_state"})


def is_internal(name: str | None) -> bool:
    return name in INTERNAL_TOPICS


def topic_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's rules), or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is reserved"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_TOPIC.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


# Kafka's throttled-replica lists (topic configs): which replicas the replication rates
# apply to (replication/throttle.py parses them for the fetch path).
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
THROTTLED_REPLICAS_CONFIGS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
THROTTLED_REPLICA_ENTRY = re.compile(r"([0-9]+):([0-9]+)")


def throttled_replicas_problem(name: str, value: str) -> str | None:
    """Why ``value`` is not a throttled-replica list (Kafka's ThrottledReplicaListValidator:
    the literal ``*``, or comma-separated ``partition:broker`` entries, blanks allowed
    around them; an empty entry is allowed, so ``""`` means none), or None."""
    entries = [e.strip() for e in value.split(",")]
    if "".join(entries) == "*" \
            or all(e == "" or THROTTLED_REPLICA_ENTRY.fullmatch(e) for e in entries):
        return None
    return (f"{name} must be the literal '*' or a list of replicas in the format "
            f"[partitionId]:[brokerId],[partitionId]:[brokerId],... (got {value!r})")


# Topic-level config names Raftwood acts on; CreateTopics and the config APIs refuse
# any other name with INVALID_CONFIG (a typo must not pass silently).  cleanup.policy
# and the compaction settings are LogConfig's (the log cleaner serves them); the
# throttled-replica lists (above) are the replica manager's.
TOPIC_CONFIG_KEYS = frozenset(LogConfig().to_properties()) | {
    "min.insync.replicas", "unclean.leader.election.enable"} | set(THROTTLED_REPLICAS_CONFIGS)


def topic_config_problem(configs: dict[str, str]) -> str | None:
    """Why these topic config overrides are unacceptable by name, or None."""
    unknown = sorted(k for k in configs if k not in TOPIC_CONFIG_KEYS)
    if unknown:
        return f"unknown topic configs {unknown}"
    policy = configs.get("cleanup.policy", "delete")
    if policy not in CLEANUP_POLICIES:
        return f"cleanup.policy {policy!r} is not one of {', '.join(CLEANUP_POLICIES)}"
    for name in THROTTLED_REPLICAS_CONFIGS:
        if name in configs:
            problem = throttled_replicas_problem(name, configs[name])
            if problem:
                return problem
    return None
