"""The one error hierarchy shared by master, agent, CLI and harness.

Each class maps to one gRPC status and one HTTP status (see ``STATUS``); the master's
servicer and gateway translate in one place, and the CLI turns them back into a one-line
message and a non-zero exit.

Each is also one of Determined's ``determined.common.api.errors`` (``NotFound`` is a
``NotFoundException``, ...), so SDK scripts written for Determined catch them by the names
they know.
"""

from __future__ import annotations

from determined.common.api.errors import (
    APIException,
    ForbiddenException,
    MasterNotFoundException,
    NotFoundException,
    UnauthenticatedException,
)


class DetError(Exception):
    """An expected failure with a message meant for a person."""

    grpc_status = "UNKNOWN"
    http_status = 500
    status_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __init_subclass__(cls) -> None:
        # Determined's APIException carries the HTTP status as ``status_code``.
        super().__init_subclass__()
        cls.status_code = cls.http_status


class InvalidArgument(DetError, APIException):
    grpc_status = "INVALID_ARGUMENT"
    http_status = 400


class NotFound(DetError, NotFoundException):
    grpc_status = "NOT_FOUND"
    http_status = 404


class AlreadyExists(DetError, APIException):
    grpc_status = "ALREADY_EXISTS"
    http_status = 409


class FailedPrecondition(DetError, APIException):
    grpc_status = "FAILED_PRECONDITION"
    http_status = 409


class PermissionDenied(DetError, ForbiddenException):
    grpc_status = "PERMISSION_DENIED"
    http_status = 403


class Unauthenticated(DetError, UnauthenticatedException):
    grpc_status = "UNAUTHENTICATED"
    http_status = 401


class Unavailable(DetError, MasterNotFoundException):
    grpc_status = "UNAVAILABLE"
    http_status = 503


class ResourceExhausted(DetError, APIException):
    """Out of a resource the caller cannot fix by changing its request: the master's disk is
    full (its writes resume when there is space; callers retry)."""

    grpc_status = "RESOURCE_EXHAUSTED"
    http_status = 507  # Insufficient Storage


class Aborted(DetError, APIException):
    """A collective or long poll that can never finish (a peer died, the task ended)."""

    grpc_status = "ABORTED"
    http_status = 409


class DeadlineExceeded(DetError, APIException):
    grpc_status = "DEADLINE_EXCEEDED"
    http_status = 504


class Internal(DetError, APIException):
    """A failure the master reported without a kind of its own (a bug, or an RPC status no
    class here names)."""

    grpc_status = "INTERNAL"
    http_status = 500


BY_GRPC_STATUS: dict[str, type[DetError]] = {
    cls.grpc_status: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        PermissionDenied,
        Unauthenticated,
        Unavailable,
        ResourceExhausted,
        Aborted,
        DeadlineExceeded,
        Internal,
    )
}

# The error an HTTP status of the master's gateway stands for (409 is several: the message
# says which).
BY_HTTP_STATUS: dict[int, type[DetError]] = {
    cls.http_status: cls for cls in BY_GRPC_STATUS.values() if cls not in (AlreadyExists, Aborted)
}
