"""The one error hierarchy shared by master, agent, CLI and harness.

Each class maps to one gRPC status and one HTTP status (see ``STATUS``); the master's
servicer and gateway translate in one place, and the CLI turns them back into a one-line
message and a non-zero exit.
"""

from __future__ import annotations


class DetError(Exception):
    """An expected failure with a message meant for a person."""

    grpc_status = "UNKNOWN"
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(DetError):
    grpc_status = "INVALID_ARGUMENT"
    http_status = 400


class NotFound(DetError):
    grpc_status = "NOT_FOUND"
    http_status = 404


class AlreadyExists(DetError):
    grpc_status = "ALREADY_EXISTS"
    http_status = 409


class FailedPrecondition(DetError):
    grpc_status = "FAILED_PRECONDITION"
    http_status = 409


class PermissionDenied(DetError):
    grpc_status = "PERMISSION_DENIED"
    http_status = 403


class Unauthenticated(DetError):
    grpc_status = "UNAUTHENTICATED"
    http_status = 401


class Unavailable(DetError):
    grpc_status = "UNAVAILABLE"
    http_status = 503


class ResourceExhausted(DetError):
    """Out of a resource the caller cannot fix by changing its request: the master's disk is
    full (its writes resume when there is space; callers retry)."""

    grpc_status = "RESOURCE_EXHAUSTED"
    http_status = 507  # Insufficient Storage


class Aborted(DetError):
    """A collective or long poll that can never finish (a peer died, the task ended)."""

    grpc_status = "ABORTED"
    http_status = 409


class DeadlineExceeded(DetError):
    grpc_status = "DEADLINE_EXCEEDED"
    http_status = 504


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
    )
}
