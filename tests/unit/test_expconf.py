"""The experiment-config parser: what users may write, what they get back, and what they are
told when they get it wrong."""

from __future__ import annotations

import json
import operator
import pickle
import textwrap
from typing import Any

import pytest

from determined.common.errors import InvalidArgument
from determined.common.expconf import (
    AdaptiveASHASearcher,
    AzureStorage,
    BindMount,
    CategoricalHP,
    ConstHP,
    Device,
    DirectoryStorage,
    DoubleHP,
    EnvironmentImage,
    EnvironmentVariables,
    ExperimentConfig,
    GCSStorage,
    GridSearcher,
    IntHP,
    InvalidConfig,
    Length,
    LogHP,
    ProxyPort,
    RandomSearcher,
    RegistryAuth,
    ResourcesConfig,
    S3Storage,
    SharedFSStorage,
    SingleSearcher,
    flatten_hparams,
    load_yaml,
    parse_experiment_config,
    unflatten_hparams,
)
from determined.common.expconf._profiling import OPTIMIZATIONS_DEFAULTS

MINIMAL = """
entrypoint: python3 train.py
searcher: {name: single, metric: x, max_length: {batches: 100}}
"""


def parse_yaml(text: str, defaults: dict[str, Any] | None = None) -> ExperimentConfig:
    return parse_experiment_config(load_yaml(textwrap.dedent(text)), defaults)


def minimal_with(**overrides: Any) -> dict[str, Any]:
    config = load_yaml(MINIMAL)
    config.update(overrides)
    return config


# Each case: (id, YAML text, {dotted attribute of the parsed config: expected value}).
VALID: list[tuple[str, str, dict[str, Any]]] = [
    (
        "minimal",
        MINIMAL,
        {
            "entrypoint": "python3 train.py",
            "entrypoint_is_trial_class": False,
            "searcher": SingleSearcher(metric="x", max_length=Length("batches", 100)),
            "hyperparameters": {},
            "resources": ResourcesConfig(),
            "max_restarts": 5,
            "checkpoint_storage": None,
            "checkpoint_policy": "best",
            "min_validation_period": Length("batches", 0),
            "min_checkpoint_period": Length("batches", 0),
            "records_per_epoch": 0,
            "scheduling_unit": 100,
            "bind_mounts": (),
            "data": {},
            "debug": False,
            "reproducibility.experiment_seed": None,
            "perform_initial_validation": False,
            "preemption_timeout": 30,
            "environment.image": EnvironmentImage(None, None, None),
        },
    ),
    (
        "single_without_metric_or_length",
        "entrypoint: python3 train.py\nsearcher: {name: single}",
        {"searcher": SingleSearcher()},
    ),
    (
        "random",
        """
        entrypoint: python3 train.py
        searcher:
          name: random
          metric: loss
          smaller_is_better: false
          max_trials: 8
          max_length: {epochs: 2}
          source_trial_id: 3
        """,
        {
            "searcher": RandomSearcher(
                metric="loss",
                smaller_is_better=False,
                max_trials=8,
                max_concurrent_trials=16,
                max_length=Length("epochs", 2),
                source_trial_id=3,
            ),
        },
    ),
    (
        "grid_with_counts",
        """
        entrypoint: python3 train.py
        hyperparameters:
          layers: {type: int, minval: 1, maxval: 4, count: 4}
          opt: {type: categorical, vals: [sgd, adam]}
        searcher: {name: grid, metric: acc, max_concurrent_trials: 0, max_length: 10}
        """,
        {
            "searcher": GridSearcher(
                metric="acc", max_concurrent_trials=0, max_length=Length(None, 10)
            ),
            "hyperparameters": {
                "layers": IntHP(1, 4, 4),
                "opt": CategoricalHP(("sgd", "adam")),
            },
        },
    ),
    (
        "asha_by_length",
        """
        entrypoint: python3 train.py
        searcher:
          name: adaptive_asha
          metric: loss
          max_trials: 16
          max_length: {records: 6400}
          mode: aggressive
          divisor: 3
          bracket_rungs: [4, 2]
        """,
        {
            "searcher": AdaptiveASHASearcher(
                metric="loss",
                max_trials=16,
                max_length=Length("records", 6400),
                mode="aggressive",
                divisor=3.0,
                bracket_rungs=(4, 2),
            ),
        },
    ),
    (
        "asha_by_time",
        """
        entrypoint: python3 train.py
        searcher:
          name: adaptive_asha
          metric: loss
          max_trials: 4
          time_metric: batches
          max_time: 1000
          stop_once: true
        """,
        {
            "searcher": AdaptiveASHASearcher(
                metric="loss",
                max_trials=4,
                time_metric="batches",
                max_time=1000,
                stop_once=True,
            ),
            "searcher.max_length": None,
            "searcher.max_rungs": 5,
            "searcher.divisor": 4.0,
        },
    ),
    (
        "every_hyperparameter_type",
        """
        entrypoint: python3 train.py
        searcher: {name: random, metric: loss, max_trials: 2}
        hyperparameters:
          global_batch_size: 32
          sizes: [1, 2]
          const: {type: const, val: {a: 1}}
          layers: {type: int, minval: 1, maxval: 8}
          dropout: {type: double, minval: 0, maxval: 0.5, count: 3}
          lr: {type: log, minval: -5, maxval: -1}
          wd: {type: log, base: 2, minval: -8, maxval: -2, count: 4}
          act: {type: categorical, vals: [relu, tanh, null]}
        """,
        {
            "hyperparameters": {
                "global_batch_size": ConstHP(32),
                "sizes": ConstHP([1, 2]),
                "const": ConstHP({"a": 1}),
                "layers": IntHP(1, 8),
                "dropout": DoubleHP(0.0, 0.5, 3),
                "lr": LogHP(10.0, -5.0, -1.0),
                "wd": LogHP(2.0, -8.0, -2.0, 4),
                "act": CategoricalHP(("relu", "tanh", None)),
            },
        },
    ),
    (
        "nested_hyperparameter_groups",
        """
        entrypoint: python3 train.py
        searcher: {name: grid, metric: loss}
        hyperparameters:
          optimizer:
            name: adam
            params:
              lr: {type: log, minval: -4, maxval: -2, count: 3}
        """,
        {
            "hyperparameters": {
                "optimizer": {
                    "name": ConstHP("adam"),
                    "params": {"lr": LogHP(10.0, -4.0, -2.0, 3)},
                }
            },
        },
    ),
    (
        "argv_entrypoint",
        """
        entrypoint: [python3, -m, train, --epochs, "3"]
        searcher: {name: single}
        """,
        {
            "entrypoint": ("python3", "-m", "train", "--epochs", "3"),
            "entrypoint_is_trial_class": False,
        },
    ),
    (
        "legacy_trial_class_entrypoint",
        "entrypoint: model_def:Trial\nsearcher: {name: single}",
        {"entrypoint": "model_def:Trial", "entrypoint_is_trial_class": True},
    ),
    (
        "dotted_trial_class_entrypoint",
        "entrypoint: pkg.model_def:MNistTrial\nsearcher: {name: single}",
        {"entrypoint_is_trial_class": True},
    ),
    (
        "environment_image_string",
        MINIMAL
        + """
environment:
  image: pytorch:2.3
  environment_variables: [A=1, B=x=y]
""",
        {
            "environment.image": EnvironmentImage("pytorch:2.3", "pytorch:2.3", "pytorch:2.3"),
            "environment.environment_variables": EnvironmentVariables(
                ("A=1", "B=x=y"), ("A=1", "B=x=y"), ("A=1", "B=x=y")
            ),
        },
    ),
    (
        "environment_image_mapping",
        MINIMAL
        + """
environment:
  image: {cpu: img:cpu, cuda: img:cuda}
  environment_variables: {cuda: [NCCL_DEBUG=INFO]}
  force_pull_image: true
  registry_auth: {username: u, password: p, serveraddress: reg.example.com}
  add_capabilities: [SYS_ADMIN]
  ports: {tensorboard: 6006}
  proxy_ports: [{proxy_port: 8888, unauthenticated: true}]
  pod_spec: {spec: {priorityClassName: high}}
""",
        {
            "environment.image": EnvironmentImage("img:cpu", "img:cuda", None),
            "environment.environment_variables": EnvironmentVariables((), ("NCCL_DEBUG=INFO",), ()),
            "environment.force_pull_image": True,
            "environment.registry_auth": RegistryAuth(
                username="u", password="p", serveraddress="reg.example.com"
            ),
            "environment.add_capabilities": ("SYS_ADMIN",),
            "environment.ports": {"tensorboard": 6006},
            "environment.proxy_ports": (ProxyPort(proxy_port=8888, unauthenticated=True),),
            "environment.pod_spec": {"spec": {"priorityClassName": "high"}},
        },
    ),
    (
        "resources",
        MINIMAL
        + """
resources:
  slots_per_trial: 0
  max_slots: 4
  weight: 2
  priority: 10
  resource_pool: gpus
  shm_size: 4G
  devices: [{host_path: /dev/fuse, container_path: /dev/fuse}, "/dev/kvm:/dev/kvm:rw"]
  agent_label: big
  is_single_node: true
""",
        {
            "resources": ResourcesConfig(
                slots_per_trial=0,
                max_slots=4,
                weight=2.0,
                priority=10,
                resource_pool="gpus",
                shm_size="4G",
                devices=(Device("/dev/fuse", "/dev/fuse"), Device("/dev/kvm", "/dev/kvm", "rw")),
                agent_label="big",
                is_single_node=True,
            ),
        },
    ),
    (
        "top_level_extras",
        MINIMAL
        + """
name: mnist
description: a test
labels: [a, b]
max_restarts: 0
checkpoint_policy: none
min_validation_period: {epochs: 1}
min_checkpoint_period: {records: 500}
records_per_epoch: 60000
scheduling_unit: 1
bind_mounts:
  - {host_path: /data, container_path: /data, read_only: true}
  - {host_path: /scratch, container_path: scratch, propagation: rshared}
data: {url: "s3://bucket/x", nested: [1, {a: null}]}
debug: true
reproducibility: {experiment_seed: 42}
perform_initial_validation: true
preemption_timeout: 0
project: p
workspace: w
profiling: {enabled: true, begin_on_batch: 3}
optimizations: {aggregation_frequency: 2}
""",
        {
            "name": "mnist",
            "description": "a test",
            "labels": ("a", "b"),
            "max_restarts": 0,
            "checkpoint_policy": "none",
            "min_validation_period": Length("epochs", 1),
            "min_checkpoint_period": Length("records", 500),
            "records_per_epoch": 60000,
            "scheduling_unit": 1,
            "bind_mounts": (
                BindMount("/data", "/data", read_only=True),
                BindMount("/scratch", "scratch", propagation="rshared"),
            ),
            "data": {"url": "s3://bucket/x", "nested": [1, {"a": None}]},
            "debug": True,
            "reproducibility.experiment_seed": 42,
            "perform_initial_validation": True,
            "preemption_timeout": 0,
            "project": "p",
            "workspace": "w",
            "profiling": {
                "enabled": True,
                "begin_on_batch": 3,
                "end_after_batch": None,
                "sync_timings": True,
            },
            # What is left out takes Determined's defaults.
            "optimizations": dict(OPTIMIZATIONS_DEFAULTS, aggregation_frequency=2),
        },
    ),
    (
        "nulls_mean_defaults",
        MINIMAL + "resources: null\nmax_restarts: null\nenvironment: {image: null}\n",
        {"resources": ResourcesConfig(), "max_restarts": 5, "environment.image.cpu": None},
    ),
    (
        "shared_fs_storage",
        MINIMAL
        + """
checkpoint_storage:
  type: shared_fs
  host_path: /mnt/ckpt
  storage_path: /mnt/ckpt/exp
  save_trial_best: 3
""",
        {
            "checkpoint_storage": SharedFSStorage(
                host_path="/mnt/ckpt", storage_path="/mnt/ckpt/exp", save_trial_best=3
            )
        },
    ),
    (
        "directory_storage",
        MINIMAL + "checkpoint_storage: {type: directory, container_path: /ckpt}",
        {"checkpoint_storage": DirectoryStorage(container_path="/ckpt")},
    ),
    (
        "s3_storage",
        MINIMAL
        + "checkpoint_storage: {type: s3, bucket: b, prefix: p, endpoint_url: 'http://minio:9000'}",
        {"checkpoint_storage": S3Storage(bucket="b", prefix="p", endpoint_url="http://minio:9000")},
    ),
    (
        "gcs_storage",
        MINIMAL + "checkpoint_storage: {type: gcs, bucket: b, save_experiment_best: 2}",
        {"checkpoint_storage": GCSStorage(bucket="b", save_experiment_best=2)},
    ),
    (
        "azure_storage",
        MINIMAL + "checkpoint_storage: {type: azure, container: c, connection_string: cs}",
        {"checkpoint_storage": AzureStorage(container="c", connection_string="cs")},
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [case[1:] for case in VALID], ids=[case[0] for case in VALID]
)
def test_valid_configs_parse_to_the_expected_values(text: str, expected: dict[str, Any]) -> None:
    config = parse_yaml(text)
    for attribute, value in expected.items():
        assert operator.attrgetter(attribute)(config) == value, attribute


@pytest.mark.parametrize("text", [case[1] for case in VALID], ids=[case[0] for case in VALID])
def test_to_dict_is_json_and_parses_back_to_an_equal_config(text: str) -> None:
    config = parse_yaml(text)
    as_json = json.loads(json.dumps(config.to_dict()))
    assert parse_experiment_config(as_json) == config
    assert parse_experiment_config(as_json).to_dict() == as_json


def test_minimal_config_equals_the_dataclass_defaults() -> None:
    assert parse_yaml(MINIMAL) == ExperimentConfig(
        entrypoint="python3 train.py",
        searcher=SingleSearcher(metric="x", max_length=Length.batches(100)),
    )


MASTER_DEFAULTS: dict[str, Any] = {
    "checkpoint_storage": {
        "type": "shared_fs",
        "host_path": "/var/det/ckpt",
        "save_trial_best": 2,
    },
    "resources": {"resource_pool": "default"},
    "environment": {"image": {"cpu": "det:cpu", "cuda": "det:cuda", "rocm": "det:rocm"}},
    "bind_mounts": [{"host_path": "/datasets", "container_path": "/datasets"}],
}


def test_master_defaults_fill_what_the_user_left_out() -> None:
    config = parse_yaml(MINIMAL + "resources: {slots_per_trial: 2}", MASTER_DEFAULTS)
    assert config.checkpoint_storage == SharedFSStorage(
        host_path="/var/det/ckpt", save_trial_best=2
    )
    assert config.resources == ResourcesConfig(slots_per_trial=2, resource_pool="default")
    assert config.environment.image == EnvironmentImage("det:cpu", "det:cuda", "det:rocm")
    assert config.bind_mounts == (BindMount("/datasets", "/datasets"),)


def test_user_values_win_over_master_defaults() -> None:
    text = MINIMAL + textwrap.dedent(
        """
        resources: {resource_pool: gpus}
        checkpoint_storage: {save_trial_best: 5}
        environment: {image: {cuda: mine:cuda}}
        bind_mounts: [{host_path: /mine, container_path: /datasets}]
        """
    )
    config = parse_yaml(text, MASTER_DEFAULTS)
    assert config.resources.resource_pool == "gpus"
    # Same storage type (none given): the user's keys merge into the master's storage.
    assert config.checkpoint_storage == SharedFSStorage(
        host_path="/var/det/ckpt", save_trial_best=5
    )
    assert config.environment.image == EnvironmentImage("det:cpu", "mine:cuda", "det:rocm")
    assert config.bind_mounts == (BindMount("/mine", "/datasets"),)


def test_user_storage_of_another_type_keeps_only_the_master_retention_counts() -> None:
    config = parse_yaml(MINIMAL + "checkpoint_storage: {type: s3, bucket: b}", MASTER_DEFAULTS)
    assert config.checkpoint_storage == S3Storage(bucket="b", save_trial_best=2)


def test_master_defaults_leave_the_callers_dicts_untouched() -> None:
    raw = minimal_with(resources={"slots_per_trial": 2})
    snapshot = json.dumps(raw, sort_keys=True)
    defaults_snapshot = json.dumps(MASTER_DEFAULTS, sort_keys=True)
    parse_experiment_config(raw, MASTER_DEFAULTS)
    assert json.dumps(raw, sort_keys=True) == snapshot
    assert json.dumps(MASTER_DEFAULTS, sort_keys=True) == defaults_snapshot


ASHA = {"name": "adaptive_asha", "metric": "loss", "max_trials": 4}
LR = {"type": "double", "minval": 0.1, "maxval": 0.2}

# Each case: (id, config, the exact errors reported).
INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    ("unknown_top_level_key", minimal_with(foo=1), ["foo: unknown key"]),
    (
        "misspelled_key_gets_a_hint",
        minimal_with(max_restart=1),
        ["max_restart: unknown key; did you mean 'max_restarts'?"],
    ),
    (
        "missing_entrypoint_and_searcher",
        {"name": "x"},
        ["entrypoint: required", "searcher: required"],
    ),
    ("empty_entrypoint", minimal_with(entrypoint="  "), ["entrypoint: must not be empty"]),
    ("empty_argv", minimal_with(entrypoint=[]), ["entrypoint: must not be empty"]),
    (
        "argv_with_a_number",
        minimal_with(entrypoint=["python3", 3]),
        ["entrypoint[1]: expected a string, got an integer (3)"],
    ),
    (
        "entrypoint_mapping",
        minimal_with(entrypoint={"a": 1}),
        ["entrypoint: expected a string or a list of strings, got a mapping"],
    ),
    (
        "string_for_an_integer",
        minimal_with(resources={"slots_per_trial": "two"}),
        ["resources.slots_per_trial: expected an integer, got 'two'"],
    ),
    (
        "bool_is_not_an_integer",
        minimal_with(max_restarts=True),
        ["max_restarts: expected an integer, got a boolean (true)"],
    ),
    (
        "float_is_not_an_integer",
        minimal_with(scheduling_unit=1.5),
        ["scheduling_unit: expected an integer, got a number (1.5)"],
    ),
    ("negative_restarts", minimal_with(max_restarts=-1), ["max_restarts: must be >= 0"]),
    (
        "resources_out_of_range",
        minimal_with(resources={"priority": 100, "weight": 0, "max_slots": 0, "shm_size": "lots"}),
        [
            "resources.max_slots: must be >= 1",
            "resources.weight: must be > 0",
            "resources.priority: must be between 1 and 99",
            "resources.shm_size: expected a size in bytes or a string like '4G', '512 MB' or "
            "'1GiB', got 'lots'",
        ],
    ),
    (
        "section_that_is_not_a_mapping",
        minimal_with(resources=[1]),
        ["resources: expected a mapping, got a list"],
    ),
    (
        "bad_checkpoint_policy",
        minimal_with(checkpoint_policy="sometimes"),
        ["checkpoint_policy: expected one of best, all, none; got 'sometimes'"],
    ),
    (
        "searcher_max_trials_below_one",
        minimal_with(searcher={"name": "random", "metric": "x", "max_trials": 0}),
        ["searcher.max_trials: must be >= 1"],
    ),
    (
        "unknown_searcher",
        minimal_with(searcher={"name": "bayesian", "population_size": 3}),
        [
            "searcher.name: expected one of single, random, grid, adaptive_asha, async_halving, "
            "optuna, pbt; got 'bayesian'"
        ],
    ),
    (
        "searcher_missing_metric_and_max_trials",
        minimal_with(searcher={"name": "random"}),
        ["searcher.metric: required", "searcher.max_trials: required"],
    ),
    (
        "key_of_another_searcher",
        minimal_with(searcher={"name": "grid", "metric": "x", "max_trials": 3}),
        ["searcher.max_trials: unknown key"],
    ),
    (
        "minval_not_below_maxval",
        minimal_with(hyperparameters={"lr": {"type": "double", "minval": 1, "maxval": 1}}),
        ["hyperparameters.lr.minval: must be less than maxval"],
    ),
    (
        "nested_hyperparameter_error_has_the_full_path",
        minimal_with(hyperparameters={"optimizer": {"lr": {"type": "log", "minval": -1}}}),
        ["hyperparameters.optimizer.lr.maxval: required"],
    ),
    (
        "int_hyperparameter_with_floats_and_zero_count",
        minimal_with(
            hyperparameters={"n": {"type": "int", "minval": 0.5, "maxval": 4, "count": 0}}
        ),
        [
            "hyperparameters.n.minval: expected an integer, got a number (0.5)",
            "hyperparameters.n.count: must be >= 1",
        ],
    ),
    (
        "unknown_hyperparameter_type",
        minimal_with(hyperparameters={"x": {"type": "uniform", "low": 0}}),
        [
            "hyperparameters.x.type: expected one of const, int, double, log, categorical; "
            "got 'uniform'"
        ],
    ),
    (
        "bad_categorical_and_const",
        minimal_with(
            hyperparameters={
                "a": {"type": "categorical", "vals": []},
                "b": {"type": "categorical", "vals": "x"},
                "c": {"type": "const"},
                "d": {"type": "log", "base": 0, "minval": 1, "maxval": 2, "val": 3},
            }
        ),
        [
            "hyperparameters.a.vals: must not be empty",
            "hyperparameters.b.vals: expected a list, got 'x'",
            "hyperparameters.c.val: required",
            "hyperparameters.d.base: must be > 0",
            "hyperparameters.d.val: unknown key",
        ],
    ),
    (
        "grid_without_count",
        minimal_with(
            searcher={"name": "grid", "metric": "x"},
            hyperparameters={"lr": LR, "opt": {"mom": {"type": "int", "minval": 0, "maxval": 3}}},
        ),
        [
            "hyperparameters.lr.count: required by the grid searcher",
            "hyperparameters.opt.mom.count: required by the grid searcher",
        ],
    ),
    (
        "asha_with_neither_length_form",
        minimal_with(searcher=ASHA),
        ["searcher: adaptive_asha needs either max_length or both time_metric and max_time"],
    ),
    (
        "asha_with_both_length_forms",
        minimal_with(searcher={**ASHA, "max_length": {"batches": 9}, "max_time": 9}),
        ["searcher: adaptive_asha takes either max_length or time_metric and max_time, not both"],
    ),
    (
        "asha_with_half_the_time_form",
        minimal_with(searcher={**ASHA, "max_time": 9}),
        ["searcher.time_metric: required when max_time is set"],
    ),
    (
        "asha_bad_tuning",
        minimal_with(
            searcher={**ASHA, "max_length": 9, "mode": "wild", "divisor": 1, "max_rungs": 0}
        ),
        [
            "searcher.mode: expected one of aggressive, standard, conservative; got 'wild'",
            "searcher.divisor: must be > 1",
            "searcher.max_rungs: must be >= 1",
        ],
    ),
    (
        "length_with_two_keys",
        minimal_with(min_validation_period={"batches": 1, "epochs": 1}),
        [
            "min_validation_period: expected exactly one of batches, records, epochs; "
            "got batches, epochs"
        ],
    ),
    (
        "length_with_an_unknown_unit",
        minimal_with(min_checkpoint_period={"steps": 1}),
        ["min_checkpoint_period: expected exactly one of batches, records, epochs; got steps"],
    ),
    (
        "bare_int_is_only_a_searcher_length",
        minimal_with(min_validation_period=5),
        ["min_validation_period: expected a length like {batches: 100}, got an integer (5)"],
    ),
    (
        "negative_length",
        minimal_with(searcher={"name": "single", "max_length": {"epochs": -1}}),
        ["searcher.max_length.epochs: must be >= 1"],
    ),
    (
        "bad_checkpoint_storage_type",
        minimal_with(checkpoint_storage={"type": "ftp", "host": "x"}),
        [
            "checkpoint_storage.type: expected one of shared_fs, directory, s3, gcs, azure; "
            "got 'ftp'"
        ],
    ),
    (
        "incomplete_checkpoint_storage",
        minimal_with(checkpoint_storage={"type": "shared_fs", "host_path": "rel", "bucket": "b"}),
        [
            "checkpoint_storage.host_path: must be an absolute path, got 'rel'",
            "checkpoint_storage.bucket: unknown key",
        ],
    ),
    (
        "azure_needs_one_way_in",
        minimal_with(checkpoint_storage={"type": "azure", "container": "c", "save_trial_best": -1}),
        [
            "checkpoint_storage.save_trial_best: must be >= 0",
            "checkpoint_storage: azure needs either connection_string or account_url",
        ],
    ),
    (
        "bad_environment",
        minimal_with(
            environment={
                "image": 3,
                "environment_variables": ["OK=1", "NOPE", 7],
                "ports": {"web": 70000},
                "proxy_ports": [{"proxy_tcp": True}],
            }
        ),
        [
            "environment.image: expected a string or a mapping of cpu, cuda, rocm, "
            "got an integer (3)",
            "environment.environment_variables[1]: expected 'NAME=VALUE', got 'NOPE'",
            "environment.environment_variables[2]: expected a string, got an integer (7)",
            "environment.ports.web: must be between 1 and 65535",
            "environment.proxy_ports[0].proxy_port: required",
        ],
    ),
    (
        "bad_bind_mount",
        minimal_with(bind_mounts=[{"host_path": "data", "read_only": "yes"}]),
        [
            "bind_mounts[0].host_path: must be an absolute path, got 'data'",
            "bind_mounts[0].container_path: required",
            "bind_mounts[0].read_only: expected a boolean, got 'yes'",
        ],
    ),
    (
        "free_form_data_must_be_a_mapping",
        minimal_with(data=[1, 2]),
        ["data: expected a mapping, got a list"],
    ),
    (
        "seed_out_of_range",
        minimal_with(reproducibility={"experiment_seed": -1}),
        ["reproducibility.experiment_seed: must be between 0 and 2147483647"],
    ),
    (
        "several_errors_at_once",
        {
            "entrypoint": 5,
            "searcher": {"name": "random", "metric": "x", "max_trials": 0},
            "hyperparameters": {"lr": {"type": "double", "minval": 2, "maxval": 1}},
            "resources": {"slots_per_trial": "two"},
            "bogus": True,
        },
        [
            "entrypoint: expected a string or a list of strings, got an integer (5)",
            "hyperparameters.lr.minval: must be less than maxval",
            "searcher.max_trials: must be >= 1",
            "resources.slots_per_trial: expected an integer, got 'two'",
            "bogus: unknown key",
        ],
    ),
]


@pytest.mark.parametrize(
    ("config", "errors"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
def test_invalid_configs_report_every_error_with_its_path(
    config: dict[str, Any], errors: list[str]
) -> None:
    with pytest.raises(InvalidConfig) as info:
        parse_experiment_config(config)
    assert info.value.errors == errors
    assert str(info.value) == "\n".join(errors)


def test_invalid_config_is_an_invalid_argument_that_survives_pickling() -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_experiment_config({})
    assert isinstance(info.value, InvalidConfig)
    copied = pickle.loads(pickle.dumps(info.value))
    assert copied.errors == ["entrypoint: required", "searcher: required"]


def test_load_yaml_reports_the_line_and_column_of_a_syntax_error() -> None:
    with pytest.raises(InvalidConfig) as info:
        load_yaml("entrypoint: python3 train.py\nsearcher: {name: single\n")
    assert info.value.errors == [
        "invalid YAML at line 3, column 1: expected ',' or '}', but got '<stream end>'"
    ]


def test_load_yaml_rejects_a_document_that_is_not_a_mapping() -> None:
    with pytest.raises(InvalidConfig) as info:
        load_yaml("- a\n- b\n")
    assert info.value.errors == ["the config must be a mapping at the top level, got a list"]


def test_load_yaml_treats_an_empty_file_as_an_empty_config() -> None:
    assert load_yaml("# nothing here\n") == {}


def test_with_seed_fixes_the_seed_without_touching_the_rest() -> None:
    config = parse_yaml(MINIMAL)
    seeded = config.with_seed(1234)
    assert seeded.reproducibility.experiment_seed == 1234
    assert seeded.to_dict()["reproducibility"] == {"experiment_seed": 1234}
    assert parse_experiment_config(seeded.to_dict()) == seeded
    assert config.reproducibility.experiment_seed is None


def test_parsed_config_does_not_share_mutable_state_with_the_input() -> None:
    raw = minimal_with(data={"paths": ["a"]}, hyperparameters={"sizes": [1, 2]})
    config = parse_experiment_config(raw)
    raw["data"]["paths"].append("b")
    raw["hyperparameters"]["sizes"].append(3)
    assert config.data == {"paths": ["a"]}
    assert config.hyperparameters["sizes"] == ConstHP([1, 2])


def test_flattened_hyperparameters_rebuild_into_the_nested_shape() -> None:
    text = next(case[1] for case in VALID if case[0] == "nested_hyperparameter_groups")
    config = parse_yaml(text)
    flat = flatten_hparams(config.hyperparameters)
    assert flat == {
        ("optimizer", "name"): ConstHP("adam"),
        ("optimizer", "params", "lr"): LogHP(10.0, -4.0, -2.0, 3),
    }
    chosen = {path: f"value-of-{path[-1]}" for path in flat}
    assert unflatten_hparams(chosen) == {
        "optimizer": {"name": "value-of-name", "params": {"lr": "value-of-lr"}}
    }


def test_an_empty_group_reaches_the_trial_as_an_empty_mapping() -> None:
    # Determined's noop scenarios declare `actions: {}` and read hparams["actions"].
    config = parse_yaml(MINIMAL + "hyperparameters: {actions: {}, outer: {inner: {}, x: 1}}\n")
    flat = flatten_hparams(config.hyperparameters)
    assert flat[("actions",)] == ConstHP({}) and flat[("outer", "inner")] == ConstHP({})
    chosen = {path: hp.val for path, hp in flat.items() if isinstance(hp, ConstHP)}
    assert unflatten_hparams(chosen) == {"actions": {}, "outer": {"inner": {}, "x": 1}}


@pytest.mark.parametrize(
    ("length", "batches"),
    [
        (Length.batches(7), 7),
        (Length.records(65), 3),
        (Length.epochs(2), 7),
        (Length(None, 5), 5),
    ],
)
def test_lengths_convert_to_batches_rounding_up(length: Length, batches: int) -> None:
    assert length.to_batches(global_batch_size=32, records_per_epoch=100) == batches


def test_epochs_cannot_become_batches_without_records_per_epoch() -> None:
    with pytest.raises(ValueError, match="records_per_epoch"):
        Length.epochs(1).to_batches(global_batch_size=32)
