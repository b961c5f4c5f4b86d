"""The lone broker's metadata file (``__cluster_metadata/metadata.state``): versioned JSON.

Layout (``cat`` shows it; ``ClusterState.to_dict`` gives the fields)::

    {
      "format_version": 1,
      "cluster_id": "...", "version": 12, "applied_term": 0, "applied_index": 0,
      "next_producer_id": 1000,
      "brokers": [{"broker_id": 1, "host": "...", "port": 9092, "broker_epoch": 2,
                   "incarnation": "...", "fenced": false}],
      "topics": [{"name": "events", "topic_id": "...", "configs": {},
                  "partitions": [{"partition": 0, "replicas": [1], "leader": 1,
                                  "leader_epoch": 0, "partition_epoch": 0, "isr": [1],
                                  "replica_states": {"1": "OnlineReplica"}}]}]
    }

Written whole and atomically (``storage.checkpoint.write_atomically``): a reader sees
the old or the new file, never a mix.  Older Raftwoods pickled the ClusterState into
the same file: such a file (anything not starting with ``{``) is read with pickle
once, and the store rewrites it as JSON on its next change.  A file this code cannot
read (an unknown ``format_version``, bad JSON, a bad pickle) raises
MetadataFileError naming the file: the broker does not start on metadata it cannot
read.  Pure file I/O: any thread (the LocalStore calls it from the event loop).

Why the pickle branch stays, and why it is safe: every file Raftwood writes is JSON, so
pickle is read only to migrate a file an older Raftwood wrote (dropping it would strand
those brokers' metadata).  A file in the data directory is trusted as much as the logs
beside it, but pickle would turn write access to that directory into running code as
the broker; so the pickle is read by ``_StateUnpickler``, which resolves nothing but
the metadata's own data classes (and ``object``, which protocols 0 and 1 name): a
pickle naming anything else (``os.system``, ``builtins.eval`` ...) is refused as
unreadable before any of it runs.
"""
from __future__ import annotations

import io
import json
import logging
import os
import pickle

from storage.checkpoint import write_atomically

from .state import ClusterState

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
FILE_NAME = "metadata.state"


class MetadataFileError(Exception):
    """The metadata file exists but cannot be read; the message names the file."""


def write_state(path: str, state: ClusterState) -> None:
    """Replace ``path`` with ``state`` as JSON (format_version first), atomically."""
    document = {"format_version": FORMAT_VERSION, **state.to_dict()}
    write_atomically(path, (json.dumps(document, indent=2) + "\n").encode("utf-8"))


def read_state(path: str) -> tuple[ClusterState, bool]:
    """(state, is_legacy_pickle) read from ``path``; MetadataFileError when unreadable."""
    with open(path, "rb") as f:
        data = f.read()
    if data.lstrip().startswith(b"{"):
        return _from_json(path, data), False
    try:
        state = _StateUnpickler(io.BytesIO(data)).load()
    except Exception as exc:
        raise MetadataFileError(f"{path}: neither JSON nor an older Raftwood's pickled "
                                f"metadata ({exc!r})") from exc
    if not isinstance(state, ClusterState):
        raise MetadataFileError(f"{path}: pickled {type(state).__name__}, not a ClusterState")
    log.info("%s is an older Raftwood's pickled metadata: read once, rewritten as JSON "
             "(format_version %d) on the next change", path, FORMAT_VERSION)
    return state, True


# What an older Raftwood's pickled ClusterState names (every protocol, with protocol 0
# and 1's Python 2 spellings, which reach ``find_class`` before they are mapped).
_STATE_MODULE = "broker.controller.state"
_PICKLED_NAMES = frozenset(
    {(_STATE_MODULE, name) for name in
     ("ClusterState", "BrokerInfo", "TopicInfo", "PartitionInfo", "Election")}
    | {("copyreg", "_reconstructor"), ("copy_reg", "_reconstructor"),
       ("builtins", "object"), ("__builtin__", "object")})


class _StateUnpickler(pickle.Unpickler):
    """Unpickles a ClusterState and nothing else: any other global is refused, so no
    callable but the metadata's data classes can run while loading."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _PICKLED_NAMES:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of Raftwood's "
                                         f"metadata; refusing to load it")
        return super().find_class(module, name)


def _from_json(path: str, data: bytes) -> ClusterState:
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MetadataFileError(f"{path}: not valid JSON ({exc})") from exc
    version = document.get("format_version") if isinstance(document, dict) else None
    if version != FORMAT_VERSION:
        raise MetadataFileError(f"{path}: metadata format_version {version!r} is unknown to "
                                f"this Raftwood (it reads format_version {FORMAT_VERSION})")
    try:
        return ClusterState.from_dict(document)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MetadataFileError(f"{path}: bad metadata ({exc!r})") from exc


def metadata_path(directory: str) -> str:
    return os.path.join(directory, FILE_NAME)
