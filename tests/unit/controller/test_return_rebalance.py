"""broker/controller/controller.py: a broker that comes back opens a window of quick
preferred-leader checks, so leadership does not stay piled on the brokers that came back
first until the periodic check (``leader.imbalance.check.interval.seconds``)."""
from __future__ import annotations

from broker import config as broker_config
from broker.controller.controller import (
    UNFENCE_CHECK_INTERVAL_S,
    UNFENCE_CHECK_WINDOW_S,
    Controller,
)
from broker.controller.state import ClusterState
from broker.controller.store import LocalStore


def _controller(tmp_path) -> Controller:
    cfg = broker_config.build({"node.id": "1",
                               "leader.imbalance.check.interval.seconds": "300"})
    return Controller(LocalStore(str(tmp_path), 1), cfg)


def _state(*brokers: int) -> ClusterState:
    state = ClusterState()
    for broker_id in brokers:
        state.apply_register_broker(broker_id, "h", 9000 + broker_id, f"i{broker_id}")
    return state


def test_no_broker_returning_means_only_the_periodic_check(tmp_path):
    controller = _controller(tmp_path)
    state = _state(1, 2, 3)
    controller.maybe_open_return_window(state, 100.0)
    controller._returns_until = 0.0                       # that window is over
    controller._last_rebalance = 100.0
    controller.maybe_open_return_window(state, 101.0)    # same epochs: nothing returned
    assert not any(controller.rebalance_due(t) for t in (104.0, 150.0, 399.0))
    assert controller.rebalance_due(400.0), "the periodic check still runs"


def test_a_restarted_broker_gets_quick_checks_within_the_window_only(tmp_path):
    controller = _controller(tmp_path)
    state = _state(1, 2, 3)
    controller._last_rebalance = 100.0
    controller.maybe_open_return_window(state, 100.0)
    controller._returns_until = 0.0                       # the first window is over
    state.apply_fence_brokers([2], {})
    controller.maybe_open_return_window(state, 110.0)     # 2 fenced: nothing returned
    assert not controller.rebalance_due(110.0 + UNFENCE_CHECK_INTERVAL_S)
    state.apply_register_broker(2, "h", 9002, "i2-again")  # a new incarnation, new epoch
    controller.maybe_open_return_window(state, 120.0)
    assert not controller.rebalance_due(120.5), "the returning broker is given a moment"
    due = [t for t in range(121, 200) if controller.rebalance_due(float(t))]
    assert due[0] == 120 + UNFENCE_CHECK_INTERVAL_S
    assert len(due) >= UNFENCE_CHECK_WINDOW_S // (UNFENCE_CHECK_INTERVAL_S + 1)
    assert max(due) <= 120 + UNFENCE_CHECK_WINDOW_S, "quick checks stop after the window"


def test_a_new_controller_checks_soon_after_taking_over(tmp_path):
    controller = _controller(tmp_path)
    controller.maybe_open_return_window(_state(1, 2, 3), 50.0)
    assert controller.rebalance_due(50.0 + UNFENCE_CHECK_INTERVAL_S)
