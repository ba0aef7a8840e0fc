"""Trial metadata on a real cluster: a trial's code sets it with
core_context.train.set_metadata() and reads it back; `det trial describe` shows it."""

from __future__ import annotations

import pathlib

import pytest

from tests.cluster import Cluster
from tests.integration.test_experiment_life import make_context


@pytest.mark.slow
def test_a_trial_sets_its_metadata_and_describe_shows_it(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg, ctx = make_context(
        tmp_path,
        """
        import determined as det

        with det.core.init() as core_context:
            assert core_context.train.get_metadata() == {}
            core_context.train.set_metadata({"stage": 1})
            stored = core_context.train.set_metadata({"stage": 2, "notes": ["warm"]})
            assert stored == {"stage": 2, "notes": ["warm"]}, stored
            assert core_context.train.get_metadata() == stored
            try:
                core_context.train.set_metadata({"bad": object()})
            except TypeError as e:
                print("refused:", e)
        """,
        """
        name: metadata
        entrypoint: python3 train.py
        searcher: {name: single, metric: x, max_length: 1}
        max_restarts: 0
        """,
    )
    exp_id = cluster.create(cfg, ctx)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
    (trial,) = cluster.trials(exp_id)
    assert trial["metadata"] == {"stage": 2, "notes": ["warm"]}
    described = cluster.det("trial", "describe", str(trial["id"])).stdout
    assert 'Metadata: {"stage": 2, "notes": ["warm"]}' in described
    assert "refused: set_metadata(): the metadata is not JSON-able" in cluster.logs(trial["id"])
