from __future__ import annotations

import yaml

from determined.common import expconf
from pydet.cli import testmode

ASHA = """
name: search
entrypoint: python3 train.py
hyperparameters:
  lr: {type: log, base: 10, minval: -4, maxval: -1}
searcher:
  name: adaptive_asha
  metric: loss
  smaller_is_better: true
  max_trials: 16
  max_length: {epochs: 20}
max_restarts: 5
environment:
  environment_variables: [A=1]
"""


def test_test_mode_runs_one_short_trial_without_restarts() -> None:
    short = yaml.safe_load(testmode.shorten(ASHA))
    assert short["searcher"] == {
        "metric": "loss",
        "smaller_is_better": True,
        "name": "single",
        "max_length": {"epochs": 1},
    }
    assert short["max_restarts"] == 0
    assert short["name"] == "search (test mode)"
    assert short["environment"]["environment_variables"] == ["A=1", "DET_TEST_MODE=1"]
    expconf.parse_experiment_config(short)


def test_short_lengths_never_exceed_the_original() -> None:
    text = "entrypoint: x\nsearcher: {name: single, metric: m, max_length: {batches: 3}}\n"
    assert yaml.safe_load(testmode.shorten(text))["searcher"]["max_length"] == {"batches": 3}
    bare = "entrypoint: x\nsearcher: {name: single, metric: m, max_length: 500}\n"
    assert yaml.safe_load(testmode.shorten(bare))["searcher"]["max_length"] == 1


def test_a_pbt_search_tests_in_its_round_length_unit() -> None:
    text = (
        "entrypoint: x\nsearcher: {name: pbt, metric: m, population_size: 4, num_rounds: 3,"
        " length_per_round: {epochs: 5}, replace_function: {truncate_fraction: 0.25},"
        " explore_function: {resample_probability: 0.1, perturb_factor: 0.2}}\n"
    )
    short = yaml.safe_load(testmode.shorten(text))
    assert short["searcher"] == {"metric": "m", "name": "single", "max_length": {"epochs": 1}}
    expconf.parse_experiment_config(short)


def test_per_device_environment_variables_get_the_flag_too() -> None:
    text = (
        "entrypoint: x\nsearcher: {name: single, metric: m}\n"
        "environment: {environment_variables: {cpu: [A=1], cuda: []}}\n"
    )
    env = yaml.safe_load(testmode.shorten(text))["environment"]["environment_variables"]
    assert env == {"cpu": ["A=1", "DET_TEST_MODE=1"], "cuda": ["DET_TEST_MODE=1"]}
