"""The frameworks suite: training frameworks on a real local cluster.

Its tests need the pinned frameworks (``scripts/frameworks/install.sh``); without them the
modules that use them are skipped, saying so.
"""

from __future__ import annotations

import importlib.util
import pathlib
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture
from tests.integration.test_core_api import Api


def skip_without_frameworks(*modules: str) -> None:
    """Skip the calling test module unless ``modules`` are installed (found, not imported:
    collecting the default suite must not pay for importing transformers)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed: run scripts/frameworks/install.sh",
            allow_module_level=True,
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # Four slots: a two-slot trial and two one-slot trials at once, which is what two
    # cores carry without starving each other.
    root: pathlib.Path = tmp_path_factory.mktemp("frameworks")
    yield from cluster_fixture(root, agents=1, slots=4)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Api:
    return Api(cluster)
