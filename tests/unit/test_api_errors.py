"""Determined's exception names (``determined.common.api.errors``) catch pydet's errors,
and a failed RPC becomes the error of its status."""

from __future__ import annotations

import grpclib.const
import pytest
from grpclib.exceptions import GRPCError

from determined.common import client, errors
from determined.common.api import errors as api_errors
from tests.unit.test_import_budget import GENERATED_API, loaded_after, offenders


@pytest.mark.parametrize(
    ("status", "pydet", "determined", "http"),
    [
        ("NOT_FOUND", errors.NotFound, api_errors.NotFoundException, 404),
        ("PERMISSION_DENIED", errors.PermissionDenied, api_errors.ForbiddenException, 403),
        ("UNAUTHENTICATED", errors.Unauthenticated, api_errors.UnauthenticatedException, 401),
        ("INVALID_ARGUMENT", errors.InvalidArgument, api_errors.APIException, 400),
        ("FAILED_PRECONDITION", errors.FailedPrecondition, api_errors.APIException, 409),
        ("ALREADY_EXISTS", errors.AlreadyExists, api_errors.APIException, 409),
        ("INTERNAL", errors.Internal, api_errors.APIException, 500),
        ("DATA_LOSS", errors.Internal, api_errors.APIException, 500),
    ],
)
def test_a_refused_call_is_caught_by_pydets_and_determineds_names(
    status: str, pydet: type[errors.DetError], determined: type[Exception], http: int
) -> None:
    e = client.translate(GRPCError(grpclib.const.Status[status], "trial 7 not found"), "m:1")
    assert type(e) is pydet
    with pytest.raises(determined, match="trial 7 not found") as caught:
        raise e
    assert caught.value.message == "trial 7 not found"  # type: ignore[attr-defined]
    assert str(caught.value) == "trial 7 not found"
    if isinstance(e, api_errors.APIException):
        assert e.status_code == http


def test_an_unreachable_master_is_a_master_not_found_exception() -> None:
    e = client.translate(ConnectionRefusedError(111, "refused"), "127.0.0.1:9")
    assert isinstance(e, errors.Unavailable)
    assert isinstance(e, api_errors.MasterNotFoundException)
    assert "cannot reach the master at 127.0.0.1:9" in str(e)


def test_determineds_names_keep_their_family() -> None:
    assert issubclass(api_errors.NotFoundException, api_errors.APIException)
    assert issubclass(api_errors.APIException, api_errors.BadRequestException)
    assert issubclass(api_errors.InvalidCredentialsException, api_errors.UnauthenticatedException)
    assert not issubclass(api_errors.UnauthenticatedException, api_errors.APIException)
    assert api_errors.NotFoundException("gone").status_code == 404
    assert api_errors.APIException("bad", status_code=400).status_code == 400


def test_the_errors_module_imports_without_the_generated_api() -> None:
    modules = loaded_after("from determined.common.api import errors")
    assert offenders(modules, (*GENERATED_API, "grpclib")) == []
