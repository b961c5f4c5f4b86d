"""Purgatory: every delayed operation completes exactly once, by condition or timer."""
import asyncio

from broker.purgatory import DelayedOperation, Purgatory


class Waiter(DelayedOperation):
    def __init__(self, timeout_ms, condition):
        super().__init__(timeout_ms)
        self.condition = condition
        self.completions = 0
        self.expirations = 0

    def try_complete(self):
        if self.condition():
            return self.force_complete()
        return False

    def on_complete(self):
        self.completions += 1

    def on_expiration(self):
        self.expirations += 1


def test_operation_whose_condition_holds_completes_without_being_watched():
    async def run():
        purgatory = Purgatory("t")
        op = Waiter(1000, lambda: True)
        assert purgatory.try_complete_else_watch(op, [("t", 0)])
        assert op.completions == 1 and purgatory.watched() == 0
    asyncio.run(run())


def test_trigger_completes_watcher_exactly_once_and_unwatches_every_key():
    async def run():
        purgatory = Purgatory("t")
        state = {"ready": False}
        op = Waiter(10_000, lambda: state["ready"])
        assert not purgatory.try_complete_else_watch(op, [("t", 0), ("t", 1)])
        assert purgatory.check_and_complete(("t", 0)) == 0
        state["ready"] = True
        assert purgatory.check_and_complete(("t", 1)) == 1
        assert purgatory.check_and_complete(("t", 0)) == 0
        assert op.completions == 1 and op.expirations == 0
        assert purgatory.watched() == 0
        await asyncio.sleep(0)
    asyncio.run(run())


def test_timer_expires_operation_once_and_later_triggers_do_nothing():
    async def run():
        purgatory = Purgatory("t")
        state = {"ready": False}
        op = Waiter(20, lambda: state["ready"])
        purgatory.try_complete_else_watch(op, [("t", 0)])
        await asyncio.sleep(0.2)
        assert op.completions == 1 and op.expirations == 1 and op.expired
        state["ready"] = True
        assert purgatory.check_and_complete(("t", 0)) == 0
        assert op.completions == 1
    asyncio.run(run())


def test_force_complete_cancels_timer():
    async def run():
        purgatory = Purgatory("t")
        op = Waiter(20, lambda: False)
        purgatory.try_complete_else_watch(op, [("t", 0)])
        assert op.force_complete()
        assert not op.force_complete()
        await asyncio.sleep(0.1)
        assert op.completions == 1 and op.expirations == 0
    asyncio.run(run())


def test_withdraw_unwatches_without_answering_and_the_timer_never_fires():
    async def run():
        purgatory = Purgatory("t")
        state = {"ready": False}
        op = Waiter(20, lambda: state["ready"])
        purgatory.try_complete_else_watch(op, [("t", 0), ("t", 1)])
        op.withdraw()
        assert op.completed and purgatory.watched() == 0
        state["ready"] = True
        assert purgatory.check_and_complete(("t", 0)) == 0
        await asyncio.sleep(0.1)
        assert op.completions == 0 and op.expirations == 0
        assert not op.force_complete()
    asyncio.run(run())
