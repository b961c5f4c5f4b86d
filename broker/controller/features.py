"""Finalized feature levels (Kafka's FeatureLevelRecords) and the rules that change them.

The image keeps only the levels an UpdateFeatures finalized
(``ClusterState.finalized_features``: name → level); a feature never updated is at its
default, the level the running code picks (``broker/api/features.py`` computes the
supported ranges and defaults from the APIs served).  The rules are Kafka's
FeatureControlManager's, checked twice: by the handler before submitting (so
``validate_only`` answers without writing) and again by the apply against the state it
changes, so of two racing updates the second is judged against the first's result:

* a level must lie inside the feature's supported range, and an unknown feature has
  the range [0, 0];
* a lower level needs upgrade type SAFE_DOWNGRADE or UNSAFE_DOWNGRADE, a higher one
  UPGRADE ("Can't downgrade to a newer version");
* ``metadata.version`` never goes below 3.3-IV3 (level 7); a downgrade across a level
  whose metadata changed is refused (UNSAFE_DOWNGRADE included: "not supported in this
  version");
* ``kraft.version`` is the quorum's and is not downgraded.

The first refused update refuses the whole request (Kafka 4 answers one error), and
nothing is applied (``ClusterState.apply_update_features``).  Pure functions over the
stored levels (``finalized_features``, name → level): any thread, replay-safe.
"""
from __future__ import annotations

from collections.abc import Mapping

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"

# UpdateFeatures' upgrade types (FeatureUpdate.UpgradeType).
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3

MINIMUM_METADATA_VERSION = 7  # 3.3-IV3, the first level a Kafka 4 cluster may run at
# metadata.version level → (release name, whether that level changed the metadata
# records), from Kafka's MetadataVersion: a downgrade is safe only when no level in
# (new, current] changed them.
METADATA_VERSIONS: dict[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True), 8: ("3.4-IV0", True), 9: ("3.5-IV0", False),
    10: ("3.5-IV1", False), 11: ("3.5-IV2", True), 12: ("3.6-IV0", False),
    13: ("3.6-IV1", True), 14: ("3.6-IV2", True), 15: ("3.7-IV0", True),
    16: ("3.7-IV1", False), 17: ("3.7-IV2", True), 18: ("3.7-IV3", False),
    19: ("3.7-IV4", False), 20: ("3.8-IV0", False), 21: ("3.9-IV0", False),
    22: ("4.0-IV0", False), 23: ("4.0-IV1", True), 24: ("4.0-IV2", False),
    25: ("4.0-IV3", False), 26: ("4.1-IV0", False), 27: ("4.1-IV1", False),
    28: ("4.2-IV0", False), 29: ("4.2-IV1", False),
}

Ranges = Mapping[str, "tuple[int, int] | list[int]"]


def current_level(stored: Mapping[str, int], name: str, defaults: Mapping[str, int]) -> int:
    """The finalized level of ``name``: the one stored, else the default (0 if none)."""
    return int(stored[name]) if name in stored else int(defaults.get(name, 0))


def update_problem(name: str, level: int, upgrade_type: int, current: int,
                   supported: Ranges) -> str | None:
    """Why Kafka refuses setting ``name`` from ``current`` to ``level``, or None."""
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return _invalid(name, level, "The controller does not support the given upgrade type.")
    if level < 0:
        return _invalid(name, level, "A feature version cannot be less than 0.")
    low, high = supported.get(name, (0, 0))
    if not low <= level <= high:
        what = f"versions {low}-{high}" if high else "no versions of this feature"
        return _invalid(name, level, f"Local controller only supports {what}.")
    if level < current and upgrade_type == UPGRADE:
        return _invalid(name, level, "Can't downgrade the version of this feature without "
                                     "setting the upgrade type to either safe or unsafe "
                                     "downgrade.")
    if level > current and upgrade_type != UPGRADE:
        return _invalid(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        return _metadata_version_problem(level, current, upgrade_type)
    if name == KRAFT_VERSION and level < current:
        return _invalid(name, level, "Downgrading kraft.version is not supported.")
    return None


def _metadata_version_problem(level: int, current: int, upgrade_type: int) -> str | None:
    if level not in METADATA_VERSIONS:
        return f"Invalid metadata.version {level}. Unknown metadata.version."
    if level < MINIMUM_METADATA_VERSION:
        return (f"Invalid metadata.version {level}. Unable to set a metadata.version less "
                f"than {METADATA_VERSIONS[MINIMUM_METADATA_VERSION][0]}")
    changed = any(METADATA_VERSIONS.get(v, ("", True))[1] for v in range(level + 1, current + 1))
    if level < current and changed:
        if upgrade_type == UNSAFE_DOWNGRADE:
            return (f"Invalid metadata.version {level}. Unsafe metadata downgrade is not "
                    f"supported in this version.")
        return (f"Invalid metadata.version {level}. Refusing to perform the requested "
                f"downgrade because it might delete metadata information. Retry using "
                f"UNSAFE_DOWNGRADE if you want to force the downgrade to proceed.")
    return None


def _invalid(name: str, level: int, message: str) -> str:
    return f"Invalid update version {level} for feature {name}. {message}"


def first_problem(stored: Mapping[str, int], updates: list, supported: Ranges,
                  defaults: Mapping[str, int]) -> str | None:
    """The first refused update of ``updates`` ([name, level, upgrade_type]), or None."""
    for name, level, upgrade_type in updates:
        problem = update_problem(name, int(level), int(upgrade_type),
                                 current_level(stored, name, defaults), supported)
        if problem:
            return problem
    return None
