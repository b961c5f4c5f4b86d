"""TaskSupervisor: named tasks that never end silently, periodic loops that survive a
bad tick, and a fatal path that calls the owner's stop callback once."""
from __future__ import annotations

import asyncio
import logging

from broker.tasks import TaskSupervisor


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


async def until(predicate, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.001)


def test_a_periodic_loop_that_raises_once_keeps_running(caplog):
    calls = []

    def tick():
        calls.append(len(calls))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")

    async def main():
        supervisor = TaskSupervisor("[Test]")
        task = supervisor.periodic("flaky", 0.001, tick)
        await until(lambda: len(calls) >= 5)
        assert not task.done(), "the loop ended after one failure"
        await supervisor.shutdown()
        assert task.cancelled() and len(supervisor) == 0

    with caplog.at_level(logging.INFO, logger="broker.tasks"):
        run(main())
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "'flaky'" in errors[0].getMessage(), \
        [r.getMessage() for r in errors]
    assert errors[0].exc_info is not None, "the first failure carries its traceback"
    assert any("recovered after 1 failures" in r.getMessage() for r in caplog.records)


def test_repeated_failures_are_not_logged_every_tick(caplog):
    calls = []

    def always_fails():
        calls.append(1)
        raise RuntimeError("still broken")

    async def main():
        supervisor = TaskSupervisor("[Test]")
        supervisor.periodic("broken", 0.001, always_fails)
        await until(lambda: len(calls) >= 50)
        await supervisor.shutdown()

    with caplog.at_level(logging.ERROR, logger="broker.tasks"):
        run(main())
    assert len(calls) >= 50
    assert len([r for r in caplog.records if "'broken'" in r.getMessage()]) == 1


def test_an_async_periodic_function_is_awaited():
    done = []

    async def tick():
        await asyncio.sleep(0)
        done.append(True)

    async def main():
        supervisor = TaskSupervisor("[Test]")
        supervisor.periodic("async", 0.001, tick)
        await until(lambda: len(done) >= 3)
        await supervisor.shutdown()

    run(main())


def test_a_fatal_failure_calls_the_stop_callback_once():
    reasons = []

    def tick():
        raise OSError(5, "Input/output error")

    async def main():
        supervisor = TaskSupervisor("[Test]", on_fatal=reasons.append)
        task = supervisor.periodic("disk", 0.001, tick, fatal_on=(OSError,))
        await until(task.done)
        assert not task.cancelled() and task.exception() is None, "the loop ended by itself"
        supervisor.fatal("a second fatal failure")
        await supervisor.shutdown()
        return supervisor

    supervisor = run(main())
    assert len(reasons) == 1, reasons
    assert "'disk'" in reasons[0] and "Input/output error" in reasons[0]
    assert supervisor.fatal_reason == reasons[0]


def test_a_spawned_task_marked_fatal_stops_the_broker_when_it_fails():
    reasons = []

    async def heartbeat():
        raise RuntimeError("registration impossible")

    async def main():
        supervisor = TaskSupervisor("[Test]", on_fatal=reasons.append)
        supervisor.spawn("heartbeat", heartbeat(), fatal=True)
        await until(lambda: reasons)
        assert len(supervisor) == 0

    run(main())
    assert "heartbeat" in reasons[0] and "registration impossible" in reasons[0]


def test_a_failed_task_is_logged_with_its_name_and_leaves_the_set(caplog):
    async def fails():
        raise ValueError("boom")

    async def finishes():
        return 42

    async def main():
        supervisor = TaskSupervisor("[Test]")
        failing = supervisor.spawn("alter-partition t-0", fails())
        ok = supervisor.spawn("store-group g", finishes())
        assert {failing, ok} <= supervisor.tasks
        await asyncio.gather(failing, ok, return_exceptions=True)
        await asyncio.sleep(0)  # done callbacks run
        assert len(supervisor) == 0
        assert ok.result() == 42

    with caplog.at_level(logging.ERROR, logger="broker.tasks"):
        run(main())
    messages = [r.getMessage() for r in caplog.records]
    assert any("alter-partition t-0" in m for m in messages), messages
    assert not any("store-group g" in m for m in messages), messages


def test_shutdown_cancels_every_task():
    async def forever():
        await asyncio.sleep(3600)

    async def main():
        supervisor = TaskSupervisor("[Test]")
        tasks = [supervisor.spawn(f"sleeper-{i}", forever()) for i in range(3)]
        tasks.append(supervisor.periodic("idle", 3600, lambda: None))
        await asyncio.sleep(0)
        await supervisor.shutdown()
        assert all(t.cancelled() for t in tasks)
        assert len(supervisor) == 0

    run(main())


def test_client_work_outlives_its_cancelled_caller():
    """``outlive``: cancelling the caller (a lost connection) drops the answer only; the
    work runs to its end and leaves the set."""
    steps = []

    async def work():
        steps.append("written")
        await asyncio.sleep(0.05)  # waiting for acks
        steps.append("applied")
        return 7

    async def main():
        supervisor = TaskSupervisor("[Test]")
        assert await supervisor.outlive("quick", work()) == 7
        steps.clear()
        caller = asyncio.get_running_loop().create_task(supervisor.outlive("write", work()))
        await until(lambda: steps == ["written"])
        caller.cancel()
        await asyncio.gather(caller, return_exceptions=True)
        assert caller.cancelled()
        await until(lambda: steps == ["written", "applied"])
        await until(lambda: len(supervisor) == 0 and not supervisor.work)

    run(main())


def test_failed_work_reaches_its_caller_or_the_log(caplog):
    async def fails(delay_s: float):
        await asyncio.sleep(delay_s)
        raise ValueError("boom")

    async def main():
        supervisor = TaskSupervisor("[Test]")
        try:
            await supervisor.outlive("answered", fails(0))
        except ValueError:
            pass
        else:
            raise AssertionError("the caller did not hear of the failure")
        caller = asyncio.get_running_loop().create_task(
            supervisor.outlive("orphaned", fails(0.02)))
        await asyncio.sleep(0.005)
        caller.cancel()
        await until(lambda: not supervisor.work)

    with caplog.at_level(logging.ERROR, logger="broker.tasks"):
        run(main())
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged == ["[Test] task 'orphaned' failed"], logged


def test_shutdown_lets_client_work_finish_before_cancelling():
    finished = []

    async def work():
        await asyncio.sleep(0.05)
        finished.append(True)

    async def main():
        supervisor = TaskSupervisor("[Test]")
        caller = asyncio.get_running_loop().create_task(supervisor.outlive("write", work()))
        await asyncio.sleep(0)
        caller.cancel()
        await supervisor.shutdown(grace_s=5.0)
        assert finished == [True] and len(supervisor) == 0

    run(main())
