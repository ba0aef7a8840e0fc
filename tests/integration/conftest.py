from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)
