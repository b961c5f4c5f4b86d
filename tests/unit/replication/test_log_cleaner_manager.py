"""LogCleanerManager: cleans the filthiest compacted log off the event loop, swaps on it,
skips logs that are not compacted or not dirty enough, and drops a pass whose log was
truncated while the thread worked."""
from __future__ import annotations

import asyncio
import os
import threading
from types import SimpleNamespace

from kafka.record.default_records import DefaultRecordBatchBuilder

from broker import config as broker_config
from broker.replication.log_cleaner import LogCleanerManager
from protocol.records import iter_headers
from storage import LogConfig, PartitionLog, cleaner


def make_batch(pairs):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=1_000 + i, key=key, value=value, headers=[])
    return builder.build()


def hosted(tmp_path, name, policy, updates=400, keys=5):
    log = PartitionLog.open(tmp_path / f"{name}-0", LogConfig(cleanup_policy=policy,
                                                              segment_bytes=1024))
    for n in range(0, updates, 2):
        log.append_as_leader(make_batch([(b"k%d" % (n % keys), b"v%d" % n),
                                         (b"k%d" % ((n + 1) % keys), b"v%d" % (n + 1))]), 0)
    log.update_high_watermark(log.log_end_offset)
    return SimpleNamespace(key=(name, 0), name=f"{name}-0", offline=False, log=log)


def manager_for(tmp_path, *partitions):
    offline = []
    replica_manager = SimpleNamespace(
        node_id=1, partitions={p.key: p for p in partitions},
        take_log_dir_offline=offline.append, tasks=None)
    manager = LogCleanerManager(replica_manager, broker_config.build({"log.dirs": str(tmp_path)}))
    from concurrent.futures import ThreadPoolExecutor
    manager._executor = ThreadPoolExecutor(1)
    return manager, offline


def record_count(log):
    return sum(h.records_count for h in iter_headers(log.read(0, 1 << 30)))


def test_the_compacted_log_is_cleaned_in_a_thread_while_the_loop_runs(tmp_path, monkeypatch):
    compacted = hosted(tmp_path, "compacted", "compact")
    plain = hosted(tmp_path, "plain", "delete")
    manager, offline = manager_for(tmp_path, compacted, plain)
    threads, real_clean = [], cleaner.clean

    def clean_in_thread(plan, *args):
        threads.append(threading.current_thread().name)
        return real_clean(plan, *args)

    monkeypatch.setattr(cleaner, "clean", clean_in_thread)

    async def scenario():
        assert await manager.clean_once()
        assert not await manager.clean_once()  # nothing dirty is left anywhere

    asyncio.run(scenario())
    assert threads and threads[0] != threading.main_thread().name
    assert record_count(compacted.log) < 400 // 2 and record_count(plain.log) == 400
    assert manager.passes == 1 and not offline
    manager.shutdown()


def test_a_log_truncated_while_the_thread_cleans_keeps_what_it_has(tmp_path, monkeypatch):
    partition = hosted(tmp_path, "t", "compact")
    manager, offline = manager_for(tmp_path, partition)
    real_clean = cleaner.clean
    truncated = threading.Event()

    def clean_then_wait(plan, *args):
        result = real_clean(plan, *args)
        assert truncated.wait(10)
        return result

    monkeypatch.setattr(cleaner, "clean", clean_then_wait)

    async def scenario():
        task = asyncio.ensure_future(manager.clean_once())
        await asyncio.sleep(0.05)  # the pass is in the thread: truncate on the loop
        partition.log.truncate_to(partition.log.segments[2].base_offset + 1)
        before = partition.log.read(0, 1 << 30)
        truncated.set()
        assert not await task
        return before

    before = asyncio.run(scenario())
    assert partition.log.read(0, 1 << 30) == before
    assert not [n for n in os.listdir(partition.log.directory)
                if n.endswith((".cleaned", ".swap"))]
    assert not offline
    manager.shutdown()
