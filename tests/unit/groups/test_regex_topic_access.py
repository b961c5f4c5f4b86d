"""KIP-848 regex subscriptions under an authorizer, on the coordinator in-process: each
member's pattern subscribes it only to the matching topics its principal may Describe
(``TopicAccess`` from its heartbeat), even when another member of the group may Describe
more; a changed access (an ACL change, which publishes a new image) moves the group epoch
at the next heartbeat though the group's union of topics did not change; a member
loaded from ``__consumer_offsets`` subscribes through its pattern to nothing until its
own heartbeat tells its principal.  The broker is test_groups_coordinator's stand-in."""
from __future__ import annotations

import uuid

from broker.controller.state import PartitionInfo, TopicInfo
from broker.groups.regex_subscriptions import TopicAccess
from protocol.errors import ErrorCode
from tests.unit.groups.test_groups_coordinator import run, started, until

T_ID, U_ID = str(uuid.UUID(int=0xA1)), str(uuid.UUID(int=0xB2))
SETTINGS = {"group_consumer_session_timeout_ms": 5000,
            "group_consumer_min_session_timeout_ms": 10,
            "group_consumer_heartbeat_interval_ms": 50,
            "authorizer_class_name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}


def only(*allowed: str) -> TopicAccess:
    return TopicAccess(("User:alice", "127.0.0.1", allowed), lambda topic: topic in allowed)


def heartbeat(c, member_id, epoch, access, owned=None):
    return c.consumer_group_heartbeat(
        "g", member_id, epoch, None, None, 1000 if epoch == 0 else -1,
        [] if epoch == 0 else None, "t|u" if epoch == 0 else None, None, owned,
        topic_access=access)


def target_topics(c, member_id: str) -> set[str]:
    return set(c.manager.get_group("g").consumer.target[member_id])


def test_each_member_gets_only_matching_topics_its_principal_may_describe(tmp_path):
    async def scenario():
        broker, c = await started(tmp_path, **SETTINGS)
        for name, topic_id in (("t", T_ID), ("u", U_ID)):
            broker.image.topics[name] = TopicInfo(name, topic_id, {}, {
                i: PartitionInfo([1], 1, 0, 0, [1]) for i in range(4)})
        a = await heartbeat(c, "a", 0, None)  # a super user: everything
        assert a.error == ErrorCode.NONE and set(a.assignment) == {T_ID, U_ID}
        b = await heartbeat(c, "b", 0, only("t"))
        assert b.error == ErrorCode.NONE
        assert target_topics(c, "b") <= {T_ID}, "b may not Describe u"
        epoch = c.manager.get_group("g").consumer.group_epoch
        broker.image.topics = dict(broker.image.topics)  # an ACL change: a new image
        b = await heartbeat(c, "b", b.member_epoch, only("t", "u"), owned={})
        assert b.error == ErrorCode.NONE
        consumer = c.manager.get_group("g").consumer
        assert consumer.group_epoch == epoch + 1, "b's topics changed, the union did not"
        assert consumer.regex_topics["b"] == {"t", "u"}
        broker.replica_manager.follow(0)
        broker.replica_manager.lead(0, epoch=2)
        await until(lambda: c.manager.get_group("g") is not None)
        loaded = c.manager.get_group("g").consumer
        assert loaded.members["b"].topic_access is None  # not known on this coordinator
        a = await heartbeat(c, "a", loaded.members["a"].member_epoch, None,
                            owned={k: set(v) for k, v in loaded.members["a"].assigned.items()})
        assert a.error == ErrorCode.NONE
        assert c.manager.get_group("g").consumer.target["b"] == {}, \
            "b's principal is not known yet: its pattern subscribes it to nothing"
    run(scenario())
