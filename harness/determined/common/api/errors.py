"""The exceptions of Determined's ``determined.common.api.errors``, by their names.

pydet's own hierarchy (``determined.common.errors``: ``NotFound``, ``PermissionDenied``,
...) derives from these, so a failure the SDK raises is caught by either name, as the
table below says:

=====================================  ====================================================
Determined's name                      pydet's errors that are one
=====================================  ====================================================
``NotFoundException``                  ``NotFound``: no such experiment, trial, checkpoint,
                                       user (its message names the id)
``ForbiddenException``                 ``PermissionDenied``
``UnauthenticatedException``           ``Unauthenticated``: no session, or it ended
``MasterNotFoundException``            ``Unavailable``: the master cannot be reached
``APIException``                       every refusal the master answers with that is none
                                       of the above (``InvalidArgument``,
                                       ``FailedPrecondition``, ``AlreadyExists``, ...)
=====================================  ====================================================

Each carries ``message``; an ``APIException`` also its HTTP ``status_code``.
"""

from __future__ import annotations

from typing import Any


class _WithMessage(Exception):
    """An exception whose text is its ``message``."""

    def __init__(self, message: str = "", *args: Any) -> None:
        super().__init__(message, *args)
        self.message = message

    def __str__(self) -> str:
        return self.message


class BadRequestException(_WithMessage):
    """A request the master (or the way to it) refused."""


class BadResponseException(_WithMessage):
    """An answer from the master that cannot be used."""


class MasterNotFoundException(BadRequestException):
    """The master cannot be reached at the address given."""


class APIException(BadRequestException):
    """The master refused a call: ``status_code`` is the HTTP status it stands for."""

    status_code = 500

    def __init__(self, message: str = "", *args: Any, status_code: int | None = None) -> None:
        super().__init__(message, *args)
        if status_code is not None:
            self.status_code = status_code
        self.response_error: dict[str, Any] | None = None


class NotFoundException(APIException):
    """What was asked for does not exist (HTTP 404)."""

    status_code = 404


class ForbiddenException(BadRequestException):
    """The caller may not do this (HTTP 403)."""


class UnauthenticatedException(BadRequestException):
    """The caller is not logged in, or the session has ended (HTTP 401)."""

    def __init__(
        self,
        message: str = "Unauthenticated: please log in with 'det user login <username>'",
        *args: Any,
    ) -> None:
        super().__init__(message, *args)


class CorruptTokenCacheException(Exception):
    """The cached sessions could not be read."""


class CorruptCertificateCacheException(Exception):
    """The cached master certificates could not be read."""


class EmptyResultException(BadResponseException):
    """The master answered without the object asked for."""


class DeleteFailedException(APIException):
    """A deletion the master accepted did not complete."""


class InvalidCredentialsException(UnauthenticatedException):
    """A wrong username or password."""

    def __init__(self, message: str = "invalid username or password", *args: Any) -> None:
        super().__init__(message, *args)
