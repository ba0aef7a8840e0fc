"""The SDK's enums and ``determined.common.util`` keep Determined's names and numbers."""

from __future__ import annotations

from determined.api.gen import v1
from determined.common import util
from determined.experimental import client


def test_experiment_states_mirror_the_masters_states() -> None:
    assert {s.name: s.value for s in client.ExperimentState} == {s.name: s.value for s in v1.State}
    assert client.TrialState.COMPLETED.value == v1.State.COMPLETED.value


def test_legacy_metric_groups_are_the_core_apis_groups() -> None:
    assert (util._LEGACY_TRAINING, util._LEGACY_VALIDATION) == ("training", "validation")


def test_chunks_and_sizes() -> None:
    assert ["".join(c) for c in util.chunks("ABCDEFG", 3)] == ["ABC", "DEF", "G"]
    assert list(util.chunks([1, 2, 3], 2)) == [[1, 2], [3]]
    assert util.sizeof_fmt(1536) == "1.5KB"
    assert util.sizeof_fmt(3 * 1024**3) == "3.0GB"


def test_preserve_random_state_leaves_random_as_it_was() -> None:
    import random

    @util.preserve_random_state
    def draw() -> float:
        return random.random()

    random.seed(7)
    first = draw()
    assert random.random() == first


def test_the_sdk_classes_are_importable_from_determined_experimental() -> None:
    import subprocess
    import sys

    code = (
        "import sys, determined.experimental\n"
        "assert 'determined.experimental.client' not in sys.modules\n"
        "from determined.experimental import Determined, client\n"
        "assert Determined is client.Determined\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
