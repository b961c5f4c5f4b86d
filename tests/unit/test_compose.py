"""docker-compose.yml describes a 3-broker cluster the brokers themselves would accept.

No Docker engine runs here, so each service's settings (command ``--set`` pairs and
RAFTWOOD_* environment, as ``raftwood start`` reads them) go through the broker's own
parser, ``broker.config.load``, and the cluster-wide rules are checked across services.
"""
from pathlib import Path, PurePosixPath

import pytest

from broker import config as config_module

yaml = pytest.importorskip("yaml", reason="PyYAML is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"


def load_compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


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
            for name, service in load_compose()["services"].items()}


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


def test_advertised_listener_host_is_the_service_name_and_the_raft_port_differs():
    configs = broker_configs()
    for name, config in configs.items():
        host, port = config.advertised_listener
        assert host == name
        assert config.listener == ("0.0.0.0", port), "listen on all interfaces, same port"
        raft_port = parse_voters(config["controller.quorum.voters"])[config.node_id][1]
        assert raft_port != port


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


def test_each_broker_is_reachable_from_the_host_on_19092_to_19094():
    host_ports = {}
    for name, config in broker_configs().items():
        service = load_compose()["services"][name]
        for mapping in service.get("ports") or []:
            published, _, target = str(mapping).rpartition(":")
            assert int(target) == config.listener[1]
            host_ports[name] = int(published)
    assert sorted(host_ports.values()) == [19092, 19093, 19094]


def test_services_build_the_repository_dockerfile_running_raftwood():
    text = DOCKERFILE.read_text()
    assert "FROM python:3.11-slim" in text
    assert "pip install ." in text
    assert 'ENTRYPOINT ["raftwood"]' in text and 'CMD ["start"]' in text
    for name, service in load_compose()["services"].items():
        build = service.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        assert context == ".", f"{name} does not build the repository's Dockerfile"
