"""IncrementalAlterConfigs' APPEND and SUBTRACT on Kafka's list-type topic configs
(broker/api/configs.py ``_list_change``): items, not text; over the value so far in the
request, else the topic's override, else the default."""
from __future__ import annotations

from types import SimpleNamespace

from broker import config as config_module
from broker.api.configs import APPEND, SUBTRACT, TOPIC, _list_change

LIST = "follower.replication.throttled.replicas"


def ctx_with(configs: dict):
    topic = SimpleNamespace(configs=configs)
    return SimpleNamespace(image=SimpleNamespace(topics={"t": topic}),
                           config=config_module.build({}))


def change(operation: int, value: str, name: str = LIST):
    return SimpleNamespace(name=name, value=value, config_operation=operation)


RESOURCE = SimpleNamespace(resource_type=TOPIC, resource_name="t")


def test_append_adds_missing_items_in_order_and_subtract_removes_items():
    ctx = ctx_with({LIST: "0:1, 1:2"})
    assert _list_change(ctx, RESOURCE, {}, change(APPEND, "1:2,2:3,2:3")) == "0:1,1:2,2:3"
    assert _list_change(ctx, RESOURCE, {}, change(SUBTRACT, "0:1,9:9")) == "1:2"


def test_the_default_and_earlier_changes_of_the_request_are_the_base():
    ctx = ctx_with({})
    assert _list_change(ctx, RESOURCE, {}, change(APPEND, "0:1")) == "0:1"
    assert _list_change(ctx, RESOURCE, {LIST: "5:5"}, change(APPEND, "0:1")) == "5:5,0:1"
    policy = change(APPEND, "compact", "cleanup.policy")
    assert _list_change(ctx, RESOURCE, {}, policy) == "delete,compact"
