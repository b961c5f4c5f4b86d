"""Raftwood installed from its wheel, outside the checkout, as a user without the repository
would have it.

``python -m build`` (sdist, then the wheel from the sdist, as the README says) builds the
wheel once for the module; a fresh virtualenv in a temporary directory (no system site
packages) gets it with ``pip install`` (dependencies from the package index or pip's
cache) and pytest.  Every command runs with that venv's executables, from a temporary
working directory, without PYTHONPATH, so nothing of the checkout can be imported.

Invariants checked:
* the wheel holds every module of ``broker``, ``protocol`` and ``storage``, the
  replication view's page, the ``raftwood`` command and the ``raftwood`` pytest plugin;
* the installed ``broker`` is the venv's, never the checkout's, and its page is readable
  as package data;
* the installed ``raftwood dev`` runs a 3-broker cluster on free ports in a temporary data
  directory that the installed ``raftwood`` CLI creates a topic on, produces to and
  consumes from, whose replication view serves the page, and that stops with exit 0 on
  Ctrl-C;
* a test file of a user's own project, run by the venv's pytest, gets the
  ``raftwood_broker`` fixture from the installed plugin and passes.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.integration.test_cli import DevRun

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "protocol", "storage")
BUILD_TIMEOUT_S = 600
INSTALL_TIMEOUT_S = 600
COMMAND_TIMEOUT_S = 120
DEV_START_TIMEOUT_S = 90

PLUGIN_TEST = '''
from kafka import KafkaConsumer, KafkaProducer


def test_roundtrip_through_the_plugins_broker(raftwood_broker):
    producer = KafkaProducer(bootstrap_servers=raftwood_broker.bootstrap)
    for n in range(5):
        producer.send("plugin-topic", f"m{n}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer("plugin-topic", bootstrap_servers=raftwood_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [f"m{n}".encode() for n in range(5)]
'''


def _run(args: list, *, timeout_s: float, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout_s, stdin=kwargs.pop("stdin", subprocess.DEVNULL),
                          **kwargs)
    assert done.returncode == 0, (f"{args} exited {done.returncode}\nstdout:\n"
                                  f"{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
    return done


def _outside_env(venv: Path) -> dict:
    """Our environment less what could reach the checkout: no PYTHONPATH, no other venv,
    the checkout's directories off PATH, the new venv's bin first."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
           and not k.startswith("PYTEST_")}
    path = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and not Path(p).resolve().is_relative_to(ROOT)]
    env.update(PATH=os.pathsep.join([str(venv / "bin"), *path]), VIRTUAL_ENV=str(venv),
               PYTHONUNBUFFERED="1")
    return env


class Installed:
    """The built wheel and the venv it is installed in; ``run`` runs one of the venv's
    executables from ``workdir``."""

    def __init__(self, wheel: Path, venv: Path, workdir: Path):
        self.wheel, self.venv, self.workdir = wheel, venv, workdir
        self.env = _outside_env(venv)

    def exe(self, name: str) -> Path:
        return self.venv / "bin" / name

    def run(self, name: str, *args, timeout_s: float = COMMAND_TIMEOUT_S,
            **kwargs) -> subprocess.CompletedProcess:
        return _run([self.exe(name), *args], timeout_s=timeout_s, cwd=self.workdir,
                    env=self.env, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """Build the wheel once, install it (with pytest) into a fresh venv outside the checkout.

    The venv is made without pip (``--without-pip``) and filled by this interpreter's pip
    (``pip --python``): the same install, without ensurepip's half minute."""
    home = tmp_path_factory.mktemp("wheel")
    dist = home / "dist"
    _run([sys.executable, "-m", "build", "--outdir", dist, ROOT], timeout_s=BUILD_TIMEOUT_S,
         cwd=home)
    wheels = sorted(dist.glob("raftwood-*.whl"))
    assert len(wheels) == 1, sorted(p.name for p in dist.iterdir())
    venv, workdir = home / "venv", home / "work"
    workdir.mkdir()
    _run([sys.executable, "-m", "venv", "--without-pip", venv], timeout_s=COMMAND_TIMEOUT_S,
         cwd=home)
    _run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
          "--quiet", wheels[0], "pytest"], timeout_s=INSTALL_TIMEOUT_S, cwd=workdir,
         env=_outside_env(venv))
    return Installed(wheels[0], venv, workdir)


@pytest.mark.slow
def test_the_wheel_holds_every_module_the_page_the_command_and_the_plugin(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    tracked = _run(["git", "ls-files", "--", *PACKAGES], timeout_s=60, cwd=ROOT).stdout
    wanted = {name for name in tracked.splitlines()
              if name.endswith((".py", ".html")) and (ROOT / name).exists()}
    assert "broker/ui/replication.html" in wanted
    assert wanted - names == set(), "files of the checkout's packages missing from the wheel"
    info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = zipfile.ZipFile(installed.wheel).read(info).decode()
    assert re.search(r"\[console_scripts\]\s*raftwood = broker\.cli\.main:main", entry_points)
    assert re.search(r"\[pytest11\]\s*raftwood = broker\.testing", entry_points)


@pytest.mark.slow
def test_the_installed_broker_is_the_venvs_and_reads_its_page(installed):
    shown = installed.run("python", "-c", (
        "import sys, broker, broker.ui\n"
        "from importlib import resources\n"
        "page = resources.files('broker.ui').joinpath('replication.html').read_bytes()\n"
        "print(broker.__file__); print(len(page)); print('\\n'.join(sys.path))")).stdout
    module, size, *path = shown.splitlines()
    assert Path(module).is_relative_to(installed.venv), module
    assert int(size) == (ROOT / "broker" / "ui" / "replication.html").stat().st_size
    assert not [p for p in path if p and Path(p).resolve().is_relative_to(ROOT)], path


@pytest.mark.slow
def test_raftwood_dev_from_the_wheel_serves_the_installed_cli(installed, tmp_path):
    dev = DevRun(tmp_path, 3, command=[str(installed.exe("raftwood"))], env=installed.env,
                 cwd=installed.workdir)
    port = dev.port
    try:
        dev.wait_for_line(r"^bootstrap servers: ", DEV_START_TIMEOUT_S)
        view = dev.wait_for_line(r"replication view: (http://\S+)", 30).group(1)
        bootstrap = ("--bootstrap-server", f"127.0.0.1:{port}")
        installed.run("raftwood", "topics", "create", "wheel-topic", "--partitions", "3",
                      "--replication-factor", "3", *bootstrap)
        lines = [f"line-{n}" for n in range(20)]
        installed.run("raftwood", "produce", "wheel-topic", *bootstrap,
                      input="".join(f"{line}\n" for line in lines), stdin=None)
        consumed = installed.run("raftwood", "consume", "wheel-topic", "--from-beginning",
                                 "--max-messages", str(len(lines)), "--timeout-ms", "30000",
                                 *bootstrap).stdout.split()
        assert sorted(consumed) == sorted(lines)
        with urllib.request.urlopen(view, timeout=30) as response:
            assert response.status == 200
            assert b"<html" in response.read().lower()
        assert dev.interrupt() == 0, dev.output()
    finally:
        dev.kill_all()


@pytest.mark.slow
def test_a_users_project_gets_the_fixtures_from_the_installed_plugin(installed, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_roundtrip.py").write_text(PLUGIN_TEST)
    done = _run([installed.exe("python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "test_roundtrip.py"], timeout_s=COMMAND_TIMEOUT_S * 2, cwd=project,
                env=installed.env)
    assert re.search(r"^1 passed", done.stdout, re.MULTILINE), done.stdout
