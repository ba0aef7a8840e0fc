"""The SDK's enums and ``determined.common.util`` keep Determined's names and numbers."""

from __future__ import annotations

from determined.api.gen import v1
from determined.common import util
from determined.experimental import client

# Determined 0.38.1's SDK enums, member by member (their values are its REST enum names).
DETERMINED_STATES = (
    "ACTIVE PAUSED STOPPING_COMPLETED STOPPING_CANCELED STOPPING_ERROR COMPLETED CANCELED ERROR "
    "DELETED DELETING DELETE_FAILED STOPPING_KILLED QUEUED PULLING STARTING RUNNING"
).split()
DETERMINED_TRIAL_STATES = (
    "ACTIVE PAUSED STOPPING_CANCELED STOPPING_KILLED STOPPING_COMPLETED STOPPING_ERROR CANCELED "
    "COMPLETED ERROR QUEUED PULLING STARTING RUNNING"
).split()
DETERMINED_CHECKPOINT_STATES = "ACTIVE COMPLETED ERROR DELETED PARTIALLY_DELETED".split()


def test_states_have_determineds_names_and_values() -> None:
    for enum, names in (
        (client.ExperimentState, DETERMINED_STATES),
        (client.TrialState, DETERMINED_TRIAL_STATES),
        (client.CheckpointState, DETERMINED_CHECKPOINT_STATES),
    ):
        assert [(s.name, s.value) for s in enum] == [(n, f"STATE_{n}") for n in names]
    # Every state the master shows is one of them (UNSPECIFIED is "not known yet": None).
    assert {s.name for s in v1.State} - {"UNSPECIFIED"} == set(DETERMINED_STATES)


def test_sort_and_order_enums_have_determineds_values() -> None:
    assert client.OrderBy.ASC is client.OrderBy.ASCENDING
    assert (client.OrderBy.ASC.value, client.OrderBy.DESC.value) == (
        "ORDER_BY_ASC",
        "ORDER_BY_DESC",
    )
    assert [s.name for s in client.TrialSortBy] == (
        "ID START_TIME END_TIME STATE BEST_VALIDATION_METRIC LATEST_VALIDATION_METRIC "
        "BATCHES_PROCESSED DURATION RESTARTS CHECKPOINT_SIZE LOG_RETENTION_DAYS"
    ).split()
    assert [s.name for s in client.CheckpointSortBy] == (
        "UUID TRIAL_ID BATCH_NUMBER END_TIME STATE SEARCHER_METRIC".split()
    )
    assert all(s.value == f"SORT_BY_{s.name}" for s in client.ExperimentSortBy)
    assert client.LogLevel.WARNING.value == "LOG_LEVEL_WARNING"
    assert str(client.DownloadMode.DIRECT) == "direct"


def test_the_deprecated_order_enums_warn_and_still_sort() -> None:
    import pytest

    with pytest.warns(FutureWarning, match="TrialOrderBy"):
        assert client.TrialOrderBy.DESC.value == client.OrderBy.DESC.value


def test_determined_experimental_offers_determineds_modules_and_names() -> None:
    from determined.experimental import OrderBy, TrialSortBy, checkpoint, metrics, model

    assert checkpoint.Checkpoint is client.Checkpoint
    assert metrics.TrialMetrics is client.TrialMetrics
    assert model.ModelSortBy.NAME.value == "SORT_BY_NAME"
    assert (OrderBy, TrialSortBy) == (client.OrderBy, client.TrialSortBy)
    assert (model.Model, model.ModelVersion) == (client.Model, client.ModelVersion)


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
