from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture
from tests.s3server import S3Server, s3_server


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on loopback, shared by the tests of a session."""
    yield from s3_server(tmp_path_factory)
