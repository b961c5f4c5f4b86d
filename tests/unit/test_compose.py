"""docker-compose.yml describes a 3-broker cluster the brokers themselves would accept,
and the Prometheus and Grafana that watch it.

No Docker engine runs here, so each broker service's settings (command ``--set`` pairs
and RAFTWOOD_* environment, as ``raftwood start`` reads them) go through the broker's
own parser, ``broker.config.load``, and the cluster-wide rules are checked across
services.  The monitoring services' files (compose/) must exist where they are mounted
from, Prometheus must scrape every broker's metrics port, and the Grafana dashboard may
only query metrics the broker exports (``broker.metrics.METRIC_NAMES``).
"""
import json
import re
from pathlib import Path, PurePosixPath

import pytest

from broker import config as config_module
from broker.metrics import METRIC_NAMES
from broker.metrics.collector import COUNTERS, HISTOGRAMS

yaml = pytest.importorskip("yaml", reason="PyYAML is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
# Services that are not brokers: what watches them.
MONITORING = {"prometheus": "prom/prometheus", "grafana": "grafana/grafana"}


def load_compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def broker_services() -> dict[str, dict]:
    return {name: service for name, service in load_compose()["services"].items()
            if name not in MONITORING}


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def set_pairs(command: list[str]) -> list[str]:
    assert command[0] == "start", f"a broker service runs `raftwood start`, got {command}"
    pairs = []
    rest = command[1:]
    while rest:
        flag, value, *rest = rest
        assert flag == "--set", f"unexpected argument {flag!r} in {command}"
        pairs.append(value)
    return pairs


def broker_configs() -> dict[str, config_module.BrokerConfig]:
    """service name → the BrokerConfig `raftwood start` would build in that container."""
    return {name: config_module.load(None, set_pairs(service["command"]),
                                     environ=environment(service))
            for name, service in broker_services().items()}


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    result = {}
    for voter in text.split(","):
        node_id, _, address = voter.strip().partition("@")
        host, _, port = address.rpartition(":")
        result[int(node_id)] = (host, int(port))
    return result


def test_three_broker_services_whose_settings_the_broker_parser_accepts():
    configs = broker_configs()
    assert sorted(configs) == ["broker1", "broker2", "broker3"]


def test_node_ids_are_unique():
    ids = [c.node_id for c in broker_configs().values()]
    assert len(set(ids)) == len(ids) == 3


def test_every_service_has_the_same_voters_naming_every_service_with_its_node_id():
    configs = broker_configs()
    voter_lists = {c["controller.quorum.voters"] for c in configs.values()}
    assert len(voter_lists) == 1, f"voters differ between services: {voter_lists}"
    voters = parse_voters(voter_lists.pop())
    assert {host for host, _ in voters.values()} == set(configs)
    for name, config in configs.items():
        assert voters[config.node_id][0] == name, \
            f"{name} has node.id {config.node_id}; the voters give it {voters[config.node_id]}"


def test_brokers_replicate_over_internal_advertised_as_the_service_name():
    """Kafka's INTERNAL/EXTERNAL pattern: the inter-broker listener is INTERNAL, bound on
    every interface and advertised as brokerN, the name the compose network resolves."""
    configs = broker_configs()
    for name, config in configs.items():
        plan = config.listener_plan
        assert plan.inter_broker_name == "INTERNAL"
        host, port = config.advertised_listener
        assert host == name
        assert plan.bound("INTERNAL").host == "0.0.0.0"
        assert plan.bound("INTERNAL").port == port, "listen on the port advertised"
        raft_port = parse_voters(config["controller.quorum.voters"])[config.node_id][1]
        assert raft_port not in [listener.port for listener in plan.listeners]


def test_every_listener_is_plaintext_and_internal_and_external_both_advertised():
    for name, config in broker_configs().items():
        plan = config.listener_plan
        assert sorted(a.name for a in plan.advertised) == ["EXTERNAL", "INTERNAL"], name
        assert {a.security_protocol for a in plan.advertised} == {"PLAINTEXT"}


def test_service_hostnames_match_service_names():
    for name, service in load_compose()["services"].items():
        assert service.get("hostname", name) == name


def volume_targets(service: dict) -> list[tuple[str, str]]:
    """(source, container path) of each volume, short or long syntax."""
    result = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            result.append((volume["source"], volume["target"]))
        else:
            source, target = volume.split(":")[:2]
            result.append((source, target))
    return result


def test_log_dirs_live_on_a_named_volume_of_their_own():
    compose = load_compose()
    declared = set(compose.get("volumes") or {})
    sources = []
    for name, config in broker_configs().items():
        log_dir = PurePosixPath(config["log.dirs"])
        mounts = [(source, PurePosixPath(target))
                  for source, target in volume_targets(compose["services"][name])]
        backing = [source for source, target in mounts
                   if log_dir == target or target in log_dir.parents]
        assert backing, f"{name}: log.dirs {log_dir} is on no volume ({mounts})"
        assert backing[0] in declared, f"{name}: volume {backing[0]} is not declared"
        sources.append(backing[0])
    assert len(set(sources)) == len(sources), "brokers must not share a data volume"


def published_ports(service: dict) -> dict[int, int]:
    """Container port → host port of a service's ``ports`` ("host:container")."""
    result = {}
    for mapping in service.get("ports") or []:
        published, _, target = str(mapping).rpartition(":")
        result[int(target)] = int(published.rpartition(":")[2])
    return result


def test_each_broker_is_reachable_from_the_host_on_the_port_it_advertises():
    """A host client is told localhost:<p> for the EXTERNAL listener, so <p> must be the
    published host port of the container port EXTERNAL binds; nothing else is published
    (INTERNAL and Raft stay on the compose network)."""
    host_ports = {}
    for name, config in broker_configs().items():
        plan = config.listener_plan
        external = next(a for a in plan.advertised if a.name == "EXTERNAL")
        bound = plan.bound("EXTERNAL")
        assert external.host == "localhost"
        assert bound.host == "0.0.0.0"
        published = published_ports(load_compose()["services"][name])
        assert published == {bound.port: external.port}, \
            f"{name} publishes {published}; EXTERNAL binds {bound.port} and advertises " \
            f"localhost:{external.port}"
        host_ports[name] = external.port
    assert host_ports == {"broker1": 19092, "broker2": 19093, "broker3": 19094}
    assert "localhost:19092" in COMPOSE.read_text(), "the header tells host clients"


def test_every_published_port_is_on_the_host_loopback_only():
    """EXTERNAL is advertised as localhost and PLAINTEXT without authentication, Grafana
    has admin/admin: none of it is published beyond this host."""
    for name, service in load_compose()["services"].items():
        for mapping in service.get("ports") or []:
            assert str(mapping).startswith("127.0.0.1:"), f"{name} publishes {mapping}"


def test_a_quorum_without_secret_opts_out_explicitly_and_publishes_no_raft_port():
    """The broker parser accepted every service (a quorum without secret and without the
    opt-out would not start); the opt-out is only acceptable while no Raft port is
    published to the host's network."""
    for name, config in broker_configs().items():
        if config["controller.quorum.password"] or config["controller.quorum.password.file"]:
            continue
        assert config["controller.quorum.allow.unauthenticated"] is True
        raft_port = parse_voters(config["controller.quorum.voters"])[config.node_id][1]
        assert raft_port not in published_ports(load_compose()["services"][name]), \
            f"{name} publishes its Raft port"
        assert "What that trusts" in COMPOSE.read_text(), "the file says whom it trusts"


def test_services_build_the_repository_dockerfile_running_raftwood():
    text = DOCKERFILE.read_text()
    assert "FROM python:3.11-slim" in text
    assert "pip install ." in text
    assert 'ENTRYPOINT ["raftwood"]' in text and 'CMD ["start"]' in text
    for name, service in broker_services().items():
        build = service.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        assert context == ".", f"{name} does not build the repository's Dockerfile"


# -- monitoring: Prometheus and Grafana -------------------------------------------------------

def test_prometheus_and_grafana_services_run_pinned_official_images():
    services = load_compose()["services"]
    for name, image in MONITORING.items():
        assert name in services, f"no {name} service"
        repository, _, tag = services[name]["image"].partition(":")
        assert repository == image
        assert tag and tag != "latest", f"{name}: pin the image's version"


def bind_mounts(service: dict) -> list[tuple[Path, str]]:
    """(host path in the repository, container path) of each ./ bind mount."""
    return [(ROOT / source, target) for source, target in volume_targets(service)
            if source.startswith("./")]


def test_monitoring_files_exist_where_they_are_mounted_from():
    services = load_compose()["services"]
    for name in MONITORING:
        mounts = bind_mounts(services[name])
        assert mounts, f"{name} mounts nothing from the repository"
        for source, _target in mounts:
            assert source.exists(), f"{name} mounts {source}, which is not in the repository"


def container_file(service: str, container_path: str) -> Path:
    """The repository file a service sees at ``container_path`` (through its mounts)."""
    wanted = PurePosixPath(container_path)
    for source, target in bind_mounts(load_compose()["services"][service]):
        target = PurePosixPath(target)
        if wanted == target:
            return source
        if target in wanted.parents:
            return source / wanted.relative_to(target)
    raise AssertionError(f"{service} has nothing mounted at {container_path}")


def test_prometheus_scrapes_every_broker_on_its_metrics_port():
    prometheus = load_compose()["services"]["prometheus"]
    config_path = next(arg.split("=", 1)[1] for arg in prometheus["command"]
                       if arg.startswith("--config.file="))
    config = yaml.safe_load(container_file("prometheus", config_path).read_text())
    targets = {target for job in config["scrape_configs"]
               for static in job["static_configs"] for target in static["targets"]}
    expected = set()
    for name, broker in broker_configs().items():
        assert broker["metrics.port"] > 0, f"{name} serves no metrics"
        assert broker["metrics.host"] == "0.0.0.0", \
            f"{name}: metrics on {broker['metrics.host']} are out of Prometheus' reach"
        expected.add(f"{name}:{broker['metrics.port']}")
    assert targets == expected
    assert all(job.get("metrics_path", "/metrics") == "/metrics"
               for job in config["scrape_configs"])


def grafana_provisioning(kind: str) -> list[dict]:
    directory = container_file("grafana", f"/etc/grafana/provisioning/{kind}")
    files = sorted(directory.glob("*.yml")) + sorted(directory.glob("*.yaml"))
    assert files, f"no Grafana {kind} provisioning file"
    return [yaml.safe_load(path.read_text()) for path in files]


def dashboards() -> dict[str, dict]:
    """Every dashboard JSON the Grafana provider loads, by file name."""
    [provider] = [p for config in grafana_provisioning("dashboards")
                  for p in config["providers"]]
    directory = container_file("grafana", provider["options"]["path"])
    found = {path.name: json.loads(path.read_text()) for path in directory.glob("*.json")}
    assert found, f"no dashboard JSON in {directory}"
    return found


def test_grafana_datasource_is_the_prometheus_service():
    [source] = [d for config in grafana_provisioning("datasources")
                for d in config["datasources"]]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    for name, dashboard in dashboards().items():
        for panel in dashboard["panels"]:
            for item in (panel, *panel.get("targets", [])):
                if "datasource" in item:
                    assert item["datasource"]["uid"] == source["uid"], (name, panel["title"])


SUFFIXES = ("_total", "_bucket", "_sum", "_count")


def queried_metrics(expr: str) -> set[str]:
    """Metric names in a PromQL expression (ours all start kafka_ or raftwood_)."""
    return set(re.findall(r"\b(?:kafka|raftwood)_[a-z0-9_]+", expr))


def exported_family(sample_name: str) -> str | None:
    """The family a sample name belongs to, if the broker exports it with that suffix."""
    if sample_name in METRIC_NAMES and sample_name not in COUNTERS + HISTOGRAMS:
        return sample_name
    for suffix in SUFFIXES:
        family = sample_name.removesuffix(suffix)
        if family == sample_name:
            continue
        if (suffix == "_total" and family in COUNTERS) or \
                (suffix != "_total" and family in HISTOGRAMS):
            return family
    return None


def test_the_dashboard_queries_only_metrics_the_broker_exports():
    queried = set()
    for name, dashboard in dashboards().items():
        assert dashboard["panels"], f"{name} has no panels"
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                names = queried_metrics(target["expr"])
                assert names, f"{name}: {panel['title']} queries none of our metrics"
                for sample_name in names:
                    family = exported_family(sample_name)
                    assert family, (f"{name}: panel {panel['title']!r} queries "
                                    f"{sample_name}, which the broker does not export")
                    queried.add(family)
    # The list: health, ISR churn, traffic, requests, lag, the Raft position.
    for family in ("kafka_server_replicamanager_underreplicatedpartitions",
                   "kafka_controller_kafkacontroller_offlinepartitionscount",
                   "kafka_server_replicamanager_underminisrpartitioncount",
                   "kafka_controller_kafkacontroller_activecontrollercount",
                   "kafka_server_replicamanager_isrshrinks",
                   "kafka_server_replicamanager_isrexpands",
                   "kafka_server_replicamanager_leadercount",
                   "kafka_server_replicamanager_partitioncount",
                   "kafka_network_requestmetrics_requests",
                   "kafka_network_requestmetrics_totaltimems",
                   "kafka_server_brokertopicmetrics_bytesin",
                   "kafka_server_brokertopicmetrics_bytesout",
                   "kafka_server_delayedoperationpurgatory_purgatorysize",
                   "kafka_server_replicafetchermanager_maxlag",
                   "kafka_log_log_size", "kafka_consumergroup_lag",
                   "raftwood_raft_commit_index", "raftwood_raft_term"):
        assert family in queried, f"the dashboard shows no {family}"


def test_the_dashboard_check_refuses_names_the_broker_does_not_export():
    assert exported_family("kafka_server_replicamanager_isrshrinks_total")
    assert exported_family("kafka_network_requestmetrics_totaltimems_bucket")
    assert exported_family("kafka_server_replicamanager_isrshrinks") is None  # no _total
    assert exported_family("kafka_server_replicamanager_leadercount_total") is None
    assert exported_family("kafka_server_brokertopicmetrics_bytesinpersec") is None
    assert queried_metrics('sum by (topic) (rate(kafka_log_log_size{topic="x"}[1m]))') \
        == {"kafka_log_log_size"}
