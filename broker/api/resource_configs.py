"""DescribeConfigs and (Incremental)AlterConfigs of the resources other than topics:
BROKER (4), BROKER_LOGGER (8), CLIENT_METRICS (16) and GROUP (32), as Kafka 4.x answers
them.

* BROKER ``"<id>"`` (this broker only) describes every setting with its value, source
  and synonyms, highest first: DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
  STATIC_BROKER_CONFIG (given at start), DEFAULT_CONFIG.  Settings that are not dynamic
  are read-only.  BROKER ``""`` (the cluster default) describes the dynamic default
  values only.  Altering either stores the change in the metadata after
  ``dynamic_config.validate``; every broker applies it from its next image.
* BROKER_LOGGER ``"<id>"``: this broker's loggers (broker_loggers.py); only
  IncrementalAlterConfigs changes them, at once and on this broker only.
* CLIENT_METRICS ``"<subscription name>"`` (KIP-714): ``metrics``, ``interval.ms`` and
  ``match`` (broker/metrics/client_metrics_resources.py), stored in the metadata like
  BROKER changes; described as Kafka does, the keys set only (CLIENT_METRICS_CONFIG).
* GROUP ``"<group id>"``: the group configs (groups/group_configs.py), GROUP_CONFIG
  when set, else the broker setting behind them (STATIC_BROKER_CONFIG / DEFAULT_CONFIG).

Authorization (Kafka's): the cluster's DESCRIBE_CONFIGS / ALTER_CONFIGS for BROKER,
BROKER_LOGGER and CLIENT_METRICS, the group's for GROUP.  ``validate_only`` checks and
changes nothing.  Each function returns (error code, message, entries) or (error code, message).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import DescribeConfigsResponse

from protocol.errors import ErrorCode

from ..config import SETTINGS
from ..controller.metadata_client import ApplyError, MetadataUnavailable
from ..dynamic_config import (
    CLUSTER_DEFAULT,
    DynamicConfigError,
    is_dynamic,
    layers,
    setting_of,
    validate,
)
from ..groups import group_configs
from ..metrics import client_metrics_resources as client_metrics
from ..security.acls import AclOperation, ResourceType
from . import broker_loggers

if TYPE_CHECKING:
    from protocol.messages import Request

    from .context import ApiContext

log = logging.getLogger(__name__)

BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 4, 8, 16, 32
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
DYNAMIC_BROKER_LOGGER, CLIENT_METRICS_CONFIG, GROUP_CONFIG = 6, 7, 8
SET, DELETE = 0, 1
# Kafka's ConfigType codes (DescribeConfigs v3+).
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 5, 6, 7, 9
SERVED = (BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)

Entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym


class Refused(Exception):
    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode[code] if isinstance(code, str) else code


def describe(ctx: ApiContext, request: Request,
             resource: Any) -> tuple[ErrorCode, str | None, list]:
    """The entries of one BROKER, BROKER_LOGGER or GROUP resource of a DescribeConfigs."""
    body = request.body
    synonyms = bool(getattr(body, "include_synonyms", False))
    docs = bool(getattr(body, "include_documentation", False))
    kind, name = resource.resource_type, resource.resource_name
    log.debug("DescribeConfigs of resource type %d %r", kind, name)
    try:
        _authorize(ctx, request, AclOperation.DESCRIBE_CONFIGS, kind, name)
        if kind == BROKER:
            entries = _describe_broker(ctx, name, synonyms, docs)
        elif kind == BROKER_LOGGER:
            _this_broker(ctx, name)
            entries = [_entry(n, level, DYNAMIC_BROKER_LOGGER, [], STRING, None, False)
                       for n, level in broker_loggers.levels().items()]
        elif kind == GROUP:
            entries = _describe_group(ctx, name, synonyms)
        elif kind == CLIENT_METRICS:
            entries = _describe_client_metrics(ctx, name)
        else:
            raise Refused(ErrorCode.INVALID_REQUEST, f"resource type {kind} not served")
    except Refused as exc:
        return exc.code, str(exc), []
    keys = resource.configuration_keys
    return ErrorCode.NONE, None, [e for e in entries if keys is None or e.name in keys]


async def alter(ctx: ApiContext, request: Request, resource: Any,
                changes: list[tuple[str, int, str | None]],
                validate_only: bool, replace: bool) -> tuple[ErrorCode, str | None]:
    """Alter one BROKER, BROKER_LOGGER or GROUP resource: ``changes`` are (key, SET or
    DELETE, value); ``replace`` (the legacy AlterConfigs) removes every key not given."""
    kind, name = resource.resource_type, resource.resource_name
    try:
        _authorize(ctx, request, AclOperation.ALTER_CONFIGS, kind, name)
        if kind == BROKER_LOGGER:
            _alter_loggers(ctx, name, changes, validate_only, replace)
        elif kind in (BROKER, GROUP, CLIENT_METRICS):
            bad = [key for key, operation, _ in changes if operation not in (SET, DELETE)]
            if bad:
                raise Refused(ErrorCode.INVALID_REQUEST,
                              f"APPEND/SUBTRACT are not served for these configs: {bad}")
            values = {key: value if operation == SET else None
                      for key, operation, value in changes}
            await _alter_stored(ctx, kind, name, values, validate_only, replace)
        else:
            raise Refused(ErrorCode.INVALID_REQUEST, f"resource type {kind} not served")
    except Refused as exc:
        return exc.code, str(exc)
    return ErrorCode.NONE, None


# -- BROKER ----------------------------------------------------------------------------


def _describe_broker(ctx: ApiContext, name: str, synonyms: bool, docs: bool) -> list:
    default, own = layers(ctx.image, ctx.node_id)
    if name == CLUSTER_DEFAULT:
        return [_broker_entry(ctx, key, [(DYNAMIC_DEFAULT, value)], synonyms, docs)
                for key, value in sorted(default.items())]
    _this_broker(ctx, name)
    static = ctx.config.static_dict()
    keys = sorted(set(SETTINGS) | set(static) | set(default) | set(own))
    entries = []
    for key in keys:
        found = [(source, layer[key]) for source, layer in
                 ((DYNAMIC_BROKER, own), (DYNAMIC_DEFAULT, default)) if key in layer]
        if key in ctx.config.explicit:
            found.append((STATIC, _text(static[key])))
        setting = setting_of(key)
        if key in SETTINGS and setting is not None:
            found.append((DEFAULT, _text(setting.default)))
        if found:
            entries.append(_broker_entry(ctx, key, found, synonyms, docs))
    return entries


def _broker_entry(ctx: ApiContext, key: str, found: list[tuple[int, str]], synonyms: bool,
                  docs: bool) -> Entry:
    setting = setting_of(key)
    listed = [Synonym(name=key, value=None if is_sensitive(key) else value, source=source)
              for source, value in found] if synonyms else []
    source, value = found[0]
    return _entry(key, value, source, listed, _config_type(key),
                  setting.doc if docs and setting is not None else None, not is_dynamic(key))


async def _alter_stored(ctx: ApiContext, kind: int, name: str, values: dict, validate_only: bool,
                        replace: bool) -> None:
    """Validate and store a BROKER, GROUP or CLIENT_METRICS change in the metadata."""
    current = getattr(ctx.image, "resource_configs", {}).get(kind, {}).get(name, {})
    if replace:
        values = {**dict.fromkeys(current), **values}
    if kind == BROKER:
        if name not in (CLUSTER_DEFAULT, str(ctx.node_id)):
            raise Refused(ErrorCode.INVALID_REQUEST,
                          f"Unexpected broker id, expected {ctx.node_id} or empty string, "
                          f"but received {name}")
        try:
            validate(ctx.config, ctx.image, name, values)
        except DynamicConfigError as exc:
            raise Refused(exc.code, str(exc)) from exc
    elif kind == CLIENT_METRICS:
        try:
            client_metrics.check(name, current, values)
        except ValueError as exc:
            code = ErrorCode.INVALID_REQUEST if str(exc).startswith("name") \
                else ErrorCode.INVALID_CONFIG
            raise Refused(code, str(exc)) from exc
    else:
        if not name:
            raise Refused(ErrorCode.INVALID_REQUEST, "a GROUP resource needs a group id")
        try:
            group_configs.check(ctx.config, current, values)
        except ValueError as exc:
            raise Refused(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    if validate_only or not values:
        return
    try:
        await ctx.metadata.alter_resource_configs(kind, name, values)
    except ApplyError as exc:
        raise Refused(exc.code, str(exc)) from exc
    except MetadataUnavailable as exc:
        raise Refused(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from exc


# -- BROKER_LOGGER and GROUP -------------------------------------------------------------


def _alter_loggers(ctx: ApiContext, name: str, changes: list[tuple[str, int, str | None]],
                   validate_only: bool, replace: bool) -> None:
    _this_broker(ctx, name)
    if replace:
        raise Refused(ErrorCode.INVALID_REQUEST,
                      "AlterConfigs does not serve BROKER_LOGGER: use IncrementalAlterConfigs")
    try:
        broker_loggers.check(changes)
    except broker_loggers.LoggerRefused as exc:
        raise Refused(exc.code, str(exc)) from exc
    if not validate_only:
        broker_loggers.apply(changes)


def _describe_group(ctx: ApiContext, name: str, synonyms: bool) -> list:
    if not name:
        raise Refused(ErrorCode.INVALID_REQUEST, "a GROUP resource needs a group id")
    own = group_configs.overrides(ctx.image, name)
    entries = []
    for key in sorted(group_configs.BROKER_SETTING):
        setting, _ = group_configs.BROKER_SETTING[key]
        broker = _text(group_configs.broker_value(ctx.config, key))
        found = [(GROUP_CONFIG, key, own[key])] if key in own else []
        if setting:
            source = STATIC if setting in ctx.config.explicit else DEFAULT
            found.append((source, setting, broker))
        else:
            found.append((DEFAULT, key, broker))
        listed = [Synonym(name=n, value=v, source=s) for s, n, v in found] if synonyms else []
        kind = STRING if key.endswith((".reset", ".level")) else INT
        entries.append(_entry(key, found[0][2], found[0][0], listed, kind, None, False))
    return entries


def _describe_client_metrics(ctx: ApiContext, name: str) -> list:
    """The keys set on one client-metrics resource, as Kafka's ConfigHelper lists them
    (none for a name never set)."""
    if not name:
        raise Refused(ErrorCode.INVALID_REQUEST,
                      "Client metrics subscription name must not be empty")
    own = getattr(ctx.image, "resource_configs", {}).get(CLIENT_METRICS, {}).get(name, {})
    return [_entry(key, own[key], CLIENT_METRICS_CONFIG, [],
                   INT if key == client_metrics.INTERVAL_MS else LIST, None, False)
            for key in client_metrics.CONFIGS if key in own]


# -- shared ---------------------------------------------------------------------------


def _authorize(ctx: ApiContext, request: Request, operation: AclOperation, kind: int,
               name: str) -> None:
    if kind == GROUP:
        if not ctx.authorizer.allows(request, operation, ResourceType.GROUP, name):
            raise Refused(ErrorCode.GROUP_AUTHORIZATION_FAILED,
                          f"{operation.name} on group {name!r} is required")
    elif not ctx.authorizer.allows_cluster(request, operation):
        raise Refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                      f"{operation.name} on the cluster is required")


def _this_broker(ctx: ApiContext, name: str) -> None:
    if name != str(ctx.node_id):
        raise Refused(ErrorCode.INVALID_REQUEST,
                      f"Unexpected broker id, expected {ctx.node_id}, but received {name!r}")


def _entry(name: str, value: object, source: int, synonyms: list, config_type: int,
           doc: str | None, read_only: bool) -> Entry:
    sensitive = is_sensitive(name)
    return Entry(name=name, value=None if sensitive else value, read_only=read_only,
                 config_source=source, is_default=source == DEFAULT, is_sensitive=sensitive,
                 synonyms=synonyms, config_type=PASSWORD if sensitive else config_type,
                 documentation=doc)


def is_sensitive(name: str) -> bool:
    """Kafka's PASSWORD-type settings: passwords, JAAS configs (they hold passwords),
    inline private keys, and Raftwood's Raft secret.  Described with a null value."""
    return name.endswith((".password", "sasl.jaas.config", "ssl.keystore.key"))


def _config_type(key: str) -> int:
    setting = setting_of(key)
    default = setting.default if setting is not None else ""
    if isinstance(default, bool):
        return BOOLEAN
    if isinstance(default, int):
        return LONG if abs(default) >= 2 ** 31 or key.endswith(".ms") else INT
    if isinstance(default, float):
        return DOUBLE
    return STRING


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
