"""The encoded requests the engine sends: a few of every served API and version,
refreshed as the run goes.

Building a request through kafka-python costs far more than mutating bytes, so each
(api_key, version) keeps ``SLOTS`` encoded requests (header included, correlation id 0)
and ``pick`` replaces one now and then.  Two kinds: ``valid`` requests (nulls only where
the schema allows them) and ``nulls`` requests (nulls where it does not).

Invariant: a slot's payload is exactly what kafka-python (or the hand-written classes)
encoded for a message of that API and version with client id ``CLIENT_ID``; ``body_at``
is where its body starts.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from protocol.messages import SERVED

from .requests import HAND_WRITTEN, RequestFactory, served_versions

CLIENT_ID = "fz"
SLOTS = 6
REFRESH_EVERY = 100  # one slot rebuilt per this many picks, on average
BUILD_ATTEMPTS = 20
# Produce, Fetch and ListOffsets carry the data: a third of the picks go to them (by the
# served versions alone they would get one in ten).
DATA_PATH_APIS = (0, 1, 2)
DATA_PATH_SHARE = 0.33
PRODUCE, PRODUCE_REFRESH_EVERY = 0, 2  # Produce: its batches vary the most; cheap to build
NULLS_SHARE = 0.3  # of picks for fuzz connections: requests with forbidden nulls


@dataclass(frozen=True)
class Encoded:
    """One encoded request: payload = header + body, no size prefix."""

    api_key: int
    version: int
    payload: bytes
    body_at: int
    expects_response: bool
    nulls: bool
    must_refuse: tuple = ()  # Produce: ((topic, partition), lie) pairs; see RequestFactory


class Corpus:
    """Encoded requests of every served (api_key, version); see the module docstring."""

    def __init__(self, rng: random.Random, factory: RequestFactory, *,
                 skip_clean: frozenset[int] = frozenset()):
        self.rng = rng
        self.factory = factory
        self.keys = served_versions()
        self.build_failures: dict[tuple[int, int], str] = {}
        self.slots: dict[tuple[int, int, bool], list[Encoded]] = {}
        for api_key, version in self.keys:
            for nulls in (False, True):
                built = [e for e in (self._build(api_key, version, nulls) for _ in range(SLOTS))
                         if e is not None]
                if built:
                    self.slots[(api_key, version, nulls)] = built
        # Clean connections send what Kafka must answer; see campaign.CLEAN_EXCLUDED.
        self.clean_keys = [k for k in self.keys if (k[0], k[1], False) in self.slots
                           and k[0] not in skip_clean]
        self.all_keys = sorted({k[:2] for k in self.slots})
        self.data_path_clean = [k for k in self.clean_keys if k[0] in DATA_PATH_APIS]
        self.data_path_all = [k for k in self.all_keys if k[0] in DATA_PATH_APIS]

    def covered(self) -> set[tuple[int, int]]:
        return {(k[0], k[1]) for k in self.slots}

    def pick(self, clean: bool) -> Encoded:
        rng = self.rng
        keys = self.clean_keys if clean else self.all_keys
        if rng.random() < DATA_PATH_SHARE:
            keys = self.data_path_clean if clean else self.data_path_all
        api_key, version = rng.choice(keys)[:2]
        key = (api_key, version, False if clean else rng.random() < NULLS_SHARE)
        if key not in self.slots:
            key = (api_key, version, not key[2])
        slots = self.slots[key]
        index = rng.randrange(len(slots))
        if rng.randrange(REFRESH_EVERY if api_key != PRODUCE else PRODUCE_REFRESH_EVERY) == 0:
            fresh = self._build(*key)
            if fresh is not None:
                slots[index] = fresh
        return slots[index]

    def _build(self, api_key: int, version: int, nulls: bool) -> Encoded | None:
        last_error = "no attempt"
        for _ in range(BUILD_ATTEMPTS):
            try:
                message = self.factory.build(api_key, version, nulls)
                message.with_header(correlation_id=0, client_id=CLIENT_ID)
                payload = bytes(message.encode(header=True, framed=False))
                expects = message.expect_response()
            except Exception as exc:  # a value the encoder refuses: draw again
                last_error = repr(exc)
                continue
            flexible = api_key in HAND_WRITTEN or \
                SERVED[api_key].request_class.flexible_version_q(version)
            body_at = 10 + len(CLIENT_ID) + (1 if flexible else 0)
            return Encoded(api_key, version, payload, body_at, expects, nulls,
                           tuple(self.factory.last_must_refuse.items()))
        self.build_failures[(api_key, version)] = last_error
        return None
