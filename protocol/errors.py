"""Kafka's error codes, and the errors this package raises.

The codes and their retriable flags follow Kafka's `Errors` table; only the ones a
broker of ours can answer are listed.  Two kinds of failure leave this package:

* ``CorruptRequest``: the peer sent bytes we cannot parse (bad frame, truncated body).
  The connection answers it by closing, as Kafka does.
* ``UnsupportedVersion``: a well-formed header names an API or version we do not serve.
* ``RecordError``: a record batch inside a valid request is unacceptable; it carries the
  Kafka error code the partition answers with.
"""
from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Kafka error codes (the subset a Raftwood broker answers with)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    INELIGIBLE_REPLICA = 107
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_SUBSCRIPTION_ID = 117  # client telemetry (KIP-714)
    TELEMETRY_TOO_LARGE = 118
    INVALID_RECORD_STATE = 121  # share groups (KIP-932): an acknowledgement refused
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128  # KIP-848 regex subscriptions
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE


_RETRIABLE = frozenset({
    ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.NOT_CONTROLLER, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, ErrorCode.UNSTABLE_OFFSET_COMMIT,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.CONCURRENT_TRANSACTIONS,
})


class ProtocolError(Exception):
    """Base of every error this package raises about bytes a peer sent."""


class CorruptRequest(ProtocolError):
    """The bytes do not form a request we can parse; the connection must close."""


class UnsupportedVersion(ProtocolError):
    """A well-formed request header names an API key or version we do not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        super().__init__(f"api_key={api_key} api_version={api_version} is not served")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class RecordError(ProtocolError):
    """A record batch is unacceptable; ``code`` is what the partition answers."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
