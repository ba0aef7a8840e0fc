"""A warm-started Optuna search on a real cluster: the second search starts from the first
one's finished trials (shown as imported, never run again), runs only its own budget, can
still grow with `det experiment continue`, and a source that does not match is refused."""

from __future__ import annotations

import json
import pathlib
import textwrap
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture
from tests.integration.test_search import TERMINAL, make_context

SCRIPT = """
    import determined as det

    x = det.get_cluster_info().trial.hparams["x"]

    with det.core.init() as core_context:
        for op in core_context.searcher.operations():
            core_context.train.report_validation_metrics(op.length, {"loss": (x - 0.3) ** 2})
            op.report_completed((x - 0.3) ** 2)
"""
CONFIG = """
    searcher:
      name: optuna
      metric: loss
      max_trials: 3
      max_length: 1
      max_concurrent_trials: 3
    hyperparameters:
      x: {type: double, minval: 0, maxval: 1}
    entrypoint: python3 train.py
    reproducibility: {experiment_seed: 5}
    max_restarts: 0
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("warm-cluster"), agents=1, slots=3)


def warm_config(tmp_path: pathlib.Path, name: str, searcher_extra: str, hps: str = "") -> str:
    text = textwrap.dedent(CONFIG).replace("max_trials: 3", "max_trials: 2")
    text = text.replace("  metric: loss\n", f"  metric: loss\n  {searcher_extra}\n")
    if hps:
        text = text.replace("  x: {type: double, minval: 0, maxval: 1}", hps)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def create_error(cluster: Cluster, config: str, context: pathlib.Path) -> str:
    proc = cluster.det("experiment", "create", config, str(context), check=False)
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    return proc.stderr.strip()


@pytest.mark.slow
def test_second_search_imports_the_first_ones_trials_and_runs_only_its_own_budget(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = make_context(tmp_path, "warm", SCRIPT, CONFIG)
    context = cfg.parent / "warm"
    first = cluster.create(cfg, context)
    assert cluster.wait_state(first, *TERMINAL, timeout=120) == "COMPLETED"
    old_ids = sorted(t["id"] for t in cluster.trials(first))
    assert len(old_ids) == 3

    source = f"source_experiment_id: {first}"
    second = cluster.create(warm_config(tmp_path, "second", source), context)
    assert cluster.wait_state(second, *TERMINAL, timeout=120) == "COMPLETED"
    (described,) = json.loads(cluster.det("experiment", "describe", str(second), "--json").stdout)
    imported = described["imported_trials"]
    assert [i["source_trial_id"] for i in imported] == old_ids
    assert {i["source_experiment_id"] for i in imported} == {first}
    assert all(i["note"] == "" for i in imported)
    # Only the new search's own budget ran; the old trials are not among its trials.
    own = described["trials"]
    assert len(own) == 2 and not {t["id"] for t in own} & set(old_ids)
    text = cluster.det("experiment", "describe", str(second)).stdout
    assert f"Imported trials (from experiment {first}; not run here):" in text

    # A warm-started search still grows from where it is.
    cluster.det("experiment", "continue", str(second), "--max-trials", "3")
    assert cluster.wait_state(second, *TERMINAL, timeout=120) == "COMPLETED"
    (described,) = json.loads(cluster.det("experiment", "describe", str(second), "--json").stdout)
    assert len(described["trials"]) == 3 and len(described["imported_trials"]) == 3

    # A source that is not there, or searched another metric or space, is refused at create.
    missing = warm_config(tmp_path, "missing", "source_experiment_id: 9999")
    assert "searcher.source_experiment_id: experiment 9999 not found" in create_error(
        cluster, missing, context
    )
    other = pathlib.Path(warm_config(tmp_path, "other", source))
    other.write_text(other.read_text().replace("metric: loss", "metric: acc"))
    error = create_error(cluster, str(other), context)
    assert "searcher.source_experiment_id:" in error and "same searcher metric" in error
    renamed = warm_config(
        tmp_path, "renamed", source, hps="  y: {type: double, minval: 0, maxval: 1}"
    )
    error = create_error(cluster, renamed, context)
    assert "searcher.source_experiment_id: the hyperparameter names differ" in error
    assert "only this search has y" in error and f"only experiment {first} has x" in error
