"""Cluster metadata of a single broker, kept in one JSON file in log.dirs.

This is the stand-in for the Raft-replicated metadata of the control plane: the
same records (cluster id, topics with their UUIDs, partition counts and configs) in
a file written atomically.  When the controller lands, this module's callers talk
to it instead; the record shapes stay.
"""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import asdict, dataclass, field

from storage.checkpoint import write_atomically

log = logging.getLogger(__name__)

FILE_NAME = "__raftwood_metadata.json"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249


@dataclass
class TopicRecord:
    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def uuid(self) -> uuid.UUID:
        return uuid.UUID(self.topic_id)


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


class LocalMetadata:
    """Topics and the cluster id of one broker. Event-loop only; every change is
    written atomically before the call returns."""

    def __init__(self, log_dir: str, cluster_id: str = ""):
        self.path = os.path.join(log_dir, FILE_NAME)
        self.cluster_id = cluster_id
        self.topics: dict[str, TopicRecord] = {}
        self.next_producer_id_block = 0
        os.makedirs(log_dir, exist_ok=True)
        self._load()

    def _load(self) -> None:
        if not os.path.exists(self.path):
            self.cluster_id = self.cluster_id or _new_cluster_id()
            self._save()
            return
        with open(self.path, encoding="utf-8") as f:
            doc = json.load(f)
        self.cluster_id = doc["cluster_id"]
        self.topics = {t["name"]: TopicRecord(**t) for t in doc["topics"]}
        self.next_producer_id_block = doc.get("next_producer_id_block", 0)

    def _save(self) -> None:
        doc = {"version": 1, "cluster_id": self.cluster_id,
               "topics": [asdict(t) for t in self.topics.values()],
               "next_producer_id_block": self.next_producer_id_block}
        write_atomically(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicRecord:
        record = TopicRecord(name, str(uuid.uuid4()), partitions, dict(configs))
        self.topics[name] = record
        self._save()
        log.info("created topic %s with %d partitions, configs=%s", name, partitions, configs)
        return record

    def delete_topic(self, name: str) -> TopicRecord:
        record = self.topics.pop(name)
        self._save()
        log.info("deleted topic %s", name)
        return record

    def allocate_producer_id_block(self, size: int) -> int:
        """Reserve ``size`` producer ids; returns the first. Persisted before returning,
        so no id is handed out twice across restarts."""
        first = self.next_producer_id_block
        self.next_producer_id_block = first + size
        self._save()
        return first

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        text = str(topic_id)
        return next((t for t in self.topics.values() if t.topic_id == text), None)


def _new_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, URL-safe base64 without padding."""
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
