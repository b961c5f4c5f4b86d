"""BROKER_LOGGER resources (type 8, KIP-412): this broker's loggers and their levels,
described and changed at run time with IncrementalAlterConfigs, as Kafka does.

The resource is named by the broker id (this broker's only: INVALID_REQUEST else).
Its configs are the loggers: ``root`` and every logger of Raftwood's packages
(``broker``, ``storage``, ``protocol`` and the modules under them) the process has made,
each with its effective level in Kafka's (log4j's) names: TRACE, DEBUG, INFO, WARN,
ERROR, FATAL, OFF.  SET gives a logger a level (TRACE acts as DEBUG: Python has none
finer); DELETE makes it inherit its parent's again (the root's cannot be removed).
Changes are not persisted, as in Kafka: a restart starts from ``log.level``.
"""
from __future__ import annotations

import logging

ROOT = "root"
PACKAGES = ("broker", "storage", "protocol")
OFF = logging.CRITICAL + 1
LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
          "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
          "OFF": OFF}
SET, DELETE = 0, 1


class LoggerRefused(Exception):
    """A refused logger change; ``code`` names Kafka's error code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def logger_names() -> list[str]:
    """``root`` and Raftwood's loggers that exist, sorted (packages included)."""
    names = {name for name in logging.root.manager.loggerDict
             if name.split(".", 1)[0] in PACKAGES}
    names |= {name.split(".", 1)[0] for name in names}
    return [ROOT, *sorted(names)]


def level_name(level: int) -> str:
    if level > logging.CRITICAL:
        return "OFF"
    if level >= logging.CRITICAL:
        return "FATAL"
    if level >= logging.ERROR:
        return "ERROR"
    if level >= logging.WARNING:
        return "WARN"
    if level >= logging.INFO:
        return "INFO"
    return "DEBUG"


def levels() -> dict[str, str]:
    """Logger name → its effective level, Kafka's name."""
    return {name: level_name(_logger(name).getEffectiveLevel()) for name in logger_names()}


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def check(changes: list[tuple[str, int, str | None]]) -> None:
    """LoggerRefused unless every (logger, operation, level) may be applied."""
    known = set(logger_names())
    for name, operation, value in changes:
        if operation not in (SET, DELETE):
            raise LoggerRefused("INVALID_REQUEST", f"{name}: only SET and DELETE are allowed "
                                                   f"for the BROKER_LOGGER resource")
        if name not in known:
            raise LoggerRefused("INVALID_CONFIG", f"Logger {name} does not exist!")
        if operation == DELETE and name == ROOT:
            raise LoggerRefused("INVALID_REQUEST",
                                "Removing the log level of the root logger is not allowed")
        if operation == SET and str(value or "").upper() not in LEVELS:
            raise LoggerRefused(
                "INVALID_CONFIG", f"Cannot set the log level of {name} to {value} as it is "
                                  f"not a supported log level. Valid levels are "
                                  f"{', '.join(LEVELS)}")


def apply(changes: list[tuple[str, int, str | None]]) -> None:
    """Apply checked changes (``check`` first)."""
    log = logging.getLogger(__name__)
    for name, operation, value in changes:
        level = LEVELS[str(value).upper()] if operation == SET else logging.NOTSET
        _logger(name).setLevel(level)
        log.warning("logger %s level %s", name,
                    str(value).upper() if operation == SET else "inherited (DELETE)")
