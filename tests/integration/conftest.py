from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from determined.experimental import client
from tests.cluster import Cluster, cluster_fixture
from tests.s3server import S3Server, s3_server


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on loopback, shared by the tests of a session."""
    yield from s3_server(tmp_path_factory)


@pytest.fixture(scope="module")
def det(cluster: Cluster) -> Iterator[client.Determined]:
    """The Python SDK logged in as admin to the module's cluster (modules that use it define
    a module-scoped ``cluster``)."""
    d = client.Determined(master=cluster.address, user="admin", password=cluster.admin_password)
    yield d
    d.close()
