"""The experiment page's view of a search: hyperparameters against the searcher metric in
parallel coordinates, a warm start's imported trials, and a multi-objective search's Pareto
front."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.webui.helpers import CTX, api, screenshot

pytestmark = [pytest.mark.webui, pytest.mark.slow]

HPARAMS = """
hyperparameters:
  lr: {type: log, base: 10, minval: -2, maxval: -0.3}
  act: {type: categorical, vals: [relu, tanh]}
  steps: 10
"""


def finished(cluster: Cluster, tmp: pathlib.Path, name: str, searcher: str) -> int:
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nentrypoint: python3 train.py\n{HPARAMS}searcher: {searcher}\n"
        "max_restarts: 0\nreproducibility: {experiment_seed: 11}\n"
    )
    exp_id = cluster.create(path, CTX)
    assert cluster.wait_state(exp_id, "COMPLETED", "CANCELED", "ERROR", timeout=150) == "COMPLETED"
    return exp_id


@pytest.fixture(scope="module")
def searches(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    tmp = tmp_path_factory.mktemp("search-view")
    first = finished(
        cluster,
        tmp,
        "pc-random",
        "{name: random, metric: validation_loss, max_trials: 4, max_length: 10}",
    )
    warm = finished(
        cluster,
        tmp,
        "pc-warm",
        "{name: optuna, metric: validation_loss, max_trials: 1, max_length: 10,"
        f" source_experiment_id: {first}}}",
    )
    multi = finished(
        cluster,
        tmp,
        "pc-pareto",
        "{name: optuna, sampler: nsga2, max_trials: 3, max_length: 10, metrics: "
        "[{name: validation_loss}, {name: accuracy, smaller_is_better: false}]}",
    )
    return {"random": first, "warm": warm, "multi": multi}


def open_experiment(cluster: Cluster, page: Any, exp_id: int) -> None:
    page.goto(f"http://{cluster.address}/experiments/{exp_id}")
    page.locator("svg.parallel").wait_for()


def test_parallel_coordinates_draw_one_line_per_trial_with_an_axis_per_hparam(
    cluster: Cluster, searches: dict[str, int], page: Any
) -> None:
    exp_id = searches["random"]
    trials = api(cluster, f"/api/v1/experiments/{exp_id}/trials")["trials"]
    assert len(trials) == 4
    open_experiment(cluster, page, exp_id)
    lines = page.locator("svg.parallel polyline.pc-line")
    assert lines.count() == 4
    keys = {lines.nth(i).get_attribute("data-key") for i in range(4)}
    assert keys == {f"trial {t['id']}" for t in trials}
    axes = page.locator("svg.parallel g.pc-axis")
    # The constant `steps` gets no axis: it tells trials apart nowhere.
    names = [axes.nth(i).get_attribute("data-axis") for i in range(axes.count())]
    assert names == ["act", "lr", "validation_loss"]
    # A categorical axis is labelled with its values; every line crosses every axis.
    assert set(axes.nth(0).locator("text.pc-tick").all_text_contents()) == {"relu", "tanh"}
    for i in range(4):
        assert len((lines.nth(i).get_attribute("points") or "").split()) == 3
    assert page.locator("svg.pareto").count() == 0
    screenshot(page, "parallel-coordinates")


def test_warm_started_search_shows_its_imported_trials_dashed_and_listed(
    cluster: Cluster, searches: dict[str, int], page: Any
) -> None:
    open_experiment(cluster, page, searches["warm"])
    assert page.locator("svg.parallel polyline.pc-line:not(.imported)").count() == 1
    assert page.locator("svg.parallel polyline.pc-line.imported").count() == 4
    old = api(cluster, f"/api/v1/experiments/{searches['random']}/trials")["trials"]
    section = page.locator("section", has_text="Imported trials")
    rows = section.locator("tbody tr")
    assert rows.count() == 4
    assert {rows.nth(i).locator("td").nth(1).inner_text() for i in range(4)} == {
        str(t["id"]) for t in old
    }


def test_multi_objective_search_shows_its_pareto_front(
    cluster: Cluster, searches: dict[str, int], page: Any
) -> None:
    exp_id = searches["multi"]
    front = api(cluster, f"/api/v1/experiments/{exp_id}")["paretoFront"]
    assert front
    open_experiment(cluster, page, exp_id)
    # The parallel view ranks a multi-objective search's trials by its first metric.
    assert page.locator("svg.parallel g.pc-axis").last.get_attribute("data-axis") == (
        "validation_loss"
    )
    page.locator("svg.pareto").wait_for()
    assert page.locator("svg.pareto circle.pareto-point").count() == 3
    highlighted = page.locator("svg.pareto circle.front")
    assert {highlighted.nth(i).get_attribute("data-key") for i in range(highlighted.count())} == {
        f"trial {t}" for t in front
    }
    screenshot(page, "pareto-front")
