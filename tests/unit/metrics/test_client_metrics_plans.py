"""Client-metrics resources (client_metrics_resources.py): Kafka's validation of
``metrics``/``interval.ms``/``match``, and a client's plan as the union of the prefixes
and the smallest interval of every subscription matching it, with the broker setting as
one more subscription; and ClientTelemetry changing an instance's subscription id when
its plan changes."""
from __future__ import annotations

import uuid

import pytest

from broker.metrics.client_metrics import ClientTelemetry
from broker.metrics.client_metrics_resources import Plan, check, plan
from protocol.errors import ErrorCode

CLIENT = {"client_id": "app-1", "client_software_name": "apache-kafka-java",
          "client_source_address": "10.0.0.7", "client_instance_id": str(uuid.UUID(int=1))}


@pytest.mark.parametrize("changes, why", [
    ({"interval.ms": "99"}, "between"), ({"interval.ms": "3600001"}, "between"),
    ({"interval.ms": "x"}, "integer"), ({"match": "colour=red"}, "selector"),
    ({"match": "client_id"}, "selector"), ({"match": "client_id=("}, "regular expression"),
    ({"metricz": "a"}, "Unknown")])
def test_bad_configs_are_refused_with_the_reason(changes, why):
    with pytest.raises(ValueError, match=why):
        check("s", {}, changes)


def test_good_configs_and_removals_pass():
    check("s", {}, {"metrics": "*", "interval.ms": "100", "match": "client_id=a.*,"
                    "client_software_version=1\\..*"})
    check("s", {"interval.ms": "5"}, {"interval.ms": None})  # removing a bad stored value
    with pytest.raises(ValueError, match="^name"):
        check("", {}, {"metrics": "a"})


def test_a_plan_is_the_union_of_the_matching_subscriptions():
    resources = {"a": {"metrics": "p.", "interval.ms": "7000", "match": "client_id=app-.*"},
                 "b": {"metrics": "c.,p.", "interval.ms": "5000",
                       "match": "client_software_name=apache-kafka-java,"
                                "client_source_address=10\\..*"},
                 "c": {"metrics": "*", "interval.ms": "1000", "match": "client_id=other"},
                 "d": {"metrics": "q.", "match": "client_id=app"}}  # whole value only
    assert plan(resources, CLIENT, "", 60_000) == Plan(("c.", "p."), 5000)
    assert plan(resources, {"client_id": "other"}, "", 60_000) == Plan(("",), 1000)
    assert plan(resources, {"client_id": "nobody"}, "", 60_000) == Plan((), 60_000)
    assert plan(resources, {"client_id": "nobody"}, "z.", 60_000) == Plan(("z.",), 60_000)
    assert plan({"e": {"metrics": "e."}}, CLIENT, "", 60_000) == Plan(("e.",), 300_000)


def test_a_changed_plan_changes_the_subscription_id():
    now = [0.0]
    telemetry = ClientTelemetry("", 60_000, 1024, clock=lambda: now[0])
    first = telemetry.get_subscription(None, "c", lambda _: Plan(("a.",), 1000))
    assert (first.requested_metrics, first.push_interval_ms) == (("a.",), 1000)
    error, _ = telemetry.push(first.instance_id, "c", first.subscription_id, False, 0, b"",
                              lambda _: Plan(("a.", "b."), 1000))
    assert error == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    again = telemetry.get_subscription(first.instance_id, "c",
                                       lambda _: Plan(("a.", "b."), 1000))
    assert again.error == ErrorCode.NONE and again.subscription_id != first.subscription_id
    assert again.requested_metrics == ("a.", "b.")
