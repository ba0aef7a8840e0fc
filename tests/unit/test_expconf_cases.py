"""Experiment configs as Determined 0.38 reads them: one table of cases, each a snippet and
what pydet must make of it (the filled value, or every error with its path).

A snippet's top-level keys replace those of a minimal config; a merge case also gives the
master's defaults.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any

import pytest

from determined.common.expconf import (
    InvalidConfig,
    load_yaml,
    parse_experiment_config,
    unused_settings,
)

MINIMAL = {"entrypoint": "python3 train.py", "searcher": {"name": "single", "metric": "x"}}


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    snippet: str
    # Valid: dotted paths into to_dict() (list items by index) and the value found there.
    filled: dict[str, Any] | None = None
    # Invalid: each entry starts one of the errors (path first, then the problem).
    errors: tuple[str, ...] = ()
    defaults: dict[str, Any] | None = None


def at(config: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        config = config[int(part)] if isinstance(config, list) else config[part]
    return config


GRID = "searcher: {name: grid, metric: x}\n"
ASHA = "searcher: {name: async_halving, metric: x, max_trials: 8, num_rungs: 3"
S3 = "checkpoint_storage: {type: s3, bucket: b, "
SHARED = "checkpoint_storage: {type: shared_fs, host_path: /mnt/ckpt, "
AZURE = "checkpoint_storage: {type: azure, container: c, "

# Determined's default policies (expconf's LogPoliciesConfigV0.WithDefaults), last in every
# experiment's list unless a policy of its own uses their names.
DETERMINED_LOG_POLICIES = [
    {"name": "CUDA OOM", "pattern": ".*CUDA out of memory.*", "actions": []},
    {"name": "ECC Error", "pattern": ".*uncorrectable ECC error encountered.*", "actions": []},
]

CASES = [
    # -- keys of Determined's schema that are accepted and kept ------------------------------
    Case(
        "log_policies_in_the_current_form",
        "log_policies: [{name: OOM, pattern: 'CUDA out of memory',"
        " actions: [exclude_node, {signal: oom}, cancel_retries]}]",
        filled={
            "log_policies": [
                {
                    "name": "OOM",
                    "pattern": "CUDA out of memory",
                    "actions": ["cancel_retries", "exclude_node", {"signal": "oom"}],
                },
                *DETERMINED_LOG_POLICIES,
            ]
        },
    ),
    Case(
        "log_policies_in_the_legacy_form_become_actions_pooled_by_pattern",
        "log_policies: [{pattern: a, action: {type: cancel_retries}},"
        " {pattern: a, action: {type: exclude_node}}, {pattern: b, action: {type: exclude_node}}]",
        filled={
            "log_policies": [
                {"pattern": "a", "actions": ["cancel_retries", "exclude_node"]},
                {"pattern": "b", "actions": ["exclude_node"]},
                *DETERMINED_LOG_POLICIES,
            ]
        },
    ),
    Case(
        "integrations_are_kept",
        "integrations: {webhooks: {webhook_id: [1, 2], webhook_name: [slack], exclude: false},"
        " pachyderm: {pachd: {host: p, port: 80}, proxy: {scheme: https, host: x, port: 443},"
        " dataset: {repo: r, branch: main}}}",
        filled={
            "integrations.webhooks.webhook_id": [1, 2],
            "integrations.pachyderm.dataset.repo": "r",
            "integrations.pachyderm.proxy.scheme": "https",
        },
    ),
    Case(
        "retention_policy_is_kept",
        "retention_policy: {log_retention_days: -1}",
        filled={"retention_policy": {"log_retention_days": -1}},
    ),
    Case(
        "tensorboard_storage_is_kept",
        "tensorboard_storage: {type: shared_fs, host_path: /tmp, container_path: /asdf,"
        " checkpoint_path: /qwer, tensorboard_path: /zxcv}",
        filled={
            "tensorboard_storage.type": "shared_fs",
            "tensorboard_storage.tensorboard_path": "/zxcv",
        },
    ),
    Case(
        "hpc_security_and_internal_sections_are_kept",
        "slurm: {slots_per_node: 4, gpu_type: a100, sbatch_args: [--exclusive]}\n"
        "pbs: {pbsbatch_args: [-l, walltime=1:00:00]}\n"
        "security: {kerberos: {config_file: /etc/krb5.conf}}\n"
        "internal: {native: {command: [script.py]}}\n"
        "environment: {slurm: [--mem=1G], pbs: []}",
        filled={
            "slurm.gpu_type": "a100",
            "pbs.pbsbatch_args": ["-l", "walltime=1:00:00"],
            "security.kerberos.config_file": "/etc/krb5.conf",
            "internal.native.command": ["script.py"],
            "environment.slurm": ["--mem=1G"],
        },
    ),
    Case(
        "data_layer_with_a_local_cache",
        "data_layer: {type: s3, bucket: b, bucket_directory_path: /d,"
        " local_cache_host_path: /h, local_cache_container_path: /c}",
        filled={"data_layer.local_cache_container_path": "/c"},
    ),
    Case(
        "an_absent_data_layer_is_determineds_default",
        "",
        filled={
            "data_layer": {
                "type": "shared_fs",
                "host_storage_path": None,
                "container_storage_path": None,
            }
        },
    ),
    Case(
        "resources_slots_is_accepted",
        "resources: {slots: 1, slots_per_trial: 1}",
        filled={"resources.slots": 1},
    ),
    Case(
        "shared_fs_legacy_paths_are_kept",
        SHARED + "container_path: /asdf, checkpoint_path: /qwer, tensorboard_path: /zxcv}",
        filled={"checkpoint_storage.container_path": "/asdf"},
    ),
    Case(
        "async_halving_by_length",
        ASHA + ", max_length: {batches: 900}, divisor: 3}",
        filled={"searcher.name": "async_halving", "searcher.num_rungs": 3, "searcher.divisor": 3},
    ),
    Case(
        "async_halving_by_time",
        ASHA + ", time_metric: batches, max_time: 900}",
        filled={"searcher.time_metric": "batches", "searcher.max_time": 900},
    ),
    Case(
        "searchers_determined_no_longer_runs_still_parse",
        "searcher: {name: sync_halving, metric: x, num_rungs: 4, budget: {batches: 10}}",
        filled={
            "searcher": {
                "name": "sync_halving",
                "metric": "x",
                "num_rungs": 4,
                "budget": {"batches": 10},
            }
        },
    ),
    Case(
        "pbt_with_determineds_explore_function",
        "searcher: {name: pbt, metric: x, population_size: 4, num_rounds: 2,"
        " length_per_round: {batches: 10}, replace_function: {truncate_fraction: 0.25},"
        " explore_function: {resample_probability: 0.1, perturb_factor: 0.2}}",
        filled={
            "searcher.length_per_round": {"batches": 10},
            "searcher.replace_function": {"truncate_fraction": 0.25},
            "searcher.explore_function": {"resample_probability": 0.1, "perturb_factor": 0.2},
        },
    ),
    Case(
        "profiling_and_optimizations_get_determineds_defaults",
        "profiling: {enabled: true, begin_on_batch: 10, end_after_batch: 10}",
        filled={
            "profiling.sync_timings": True,
            "profiling.end_after_batch": 10,
            "optimizations.aggregation_frequency": 1,
            "optimizations.tensor_fusion_cycle_time": 5,
        },
    ),
    # -- values that are valid, close to invalid ones -----------------------------------------
    Case(
        "memory_sizes",
        "resources: {shm_size: 1.5GiB}",
        filled={"resources.shm_size": "1.5GiB"},
    ),
    Case("memory_size_with_a_space", "resources: {shm_size: 512 mb}", filled={}),
    Case("memory_size_without_a_unit", "resources: {shm_size: '.5'}", filled={}),
    Case(
        "relative_storage_path_inside_host_path",
        SHARED + "storage_path: a/../b}",
        filled={"checkpoint_storage.storage_path": "a/../b"},
    ),
    Case("absolute_storage_path_inside_host_path", SHARED + "storage_path: /mnt/ckpt/x}"),
    Case("prefix_with_dots_inside_a_name", S3 + "prefix: a..b/c}", filled={}),
    Case("azure_account_url_with_credential", AZURE + "account_url: u, credential: k}"),
    Case(
        "null_hyperparameter_is_a_constant",
        "hyperparameters: {dropout: null}",
        filled={"hyperparameters.dropout": {"type": "const", "val": None}},
    ),
    Case(
        "grid_with_counts_inside_lists",
        GRID + "hyperparameters: {layers: [10, {type: int, minval: 1, maxval: 4, count: 2}]}",
        filled={},
    ),
    # -- invalid, each with its path -----------------------------------------------------------
    Case(
        "log_policy_with_action_and_actions",
        "log_policies: [{pattern: a, actions: [{signal: s}], action: {type: cancel_retries}}]",
        errors=("log_policies[0]: both action (Determined's older form) and actions",),
    ),
    Case(
        "log_policy_actions_of_the_wrong_form",
        "log_policies: [{pattern: a, actions: [notallowed, 3, {signal: s, other: 1}]}]",
        errors=(
            "log_policies[0].actions[0]: expected cancel_retries, exclude_node or a mapping",
            "log_policies[0].actions[1]: expected",
            "log_policies[0].actions[2]: expected",
        ),
    ),
    Case(
        "log_policy_pattern_not_a_regular_expression",
        "log_policies: [{pattern: '(unclosed', actions: [cancel_retries]}]",
        errors=("log_policies[0].pattern: not a valid regular expression",),
    ),
    Case(
        "log_policies_in_the_0_38_form_name_the_action_as_a_string",
        "log_policies: [{name: OOM, pattern: 'CUDA out of memory', action: cancel_retries}]",
        filled={
            "log_policies": [
                {"name": "OOM", "pattern": "CUDA out of memory", "actions": ["cancel_retries"]},
                *DETERMINED_LOG_POLICIES,
            ]
        },
    ),
    Case(
        "log_policies_default_to_determineds_cuda_oom_and_ecc_policies",
        "log_policies: []",
        filled={"log_policies": DETERMINED_LOG_POLICIES},
    ),
    Case(
        "a_default_log_policy_is_turned_off_by_its_name_alone",
        "log_policies: [{name: CUDA OOM}]",
        filled={
            "log_policies": [
                {"name": "CUDA OOM", "pattern": None, "actions": []},
                DETERMINED_LOG_POLICIES[1],
            ]
        },
    ),
    Case(
        "log_policy_action_string_of_another_kind",
        "log_policies: [{pattern: a, action: send_webhook}]",
        errors=("log_policies[0].action: expected one of cancel_retries, exclude_node",),
    ),
    Case(
        "log_policy_without_pattern_or_name",
        "log_policies: [{actions: [cancel_retries]}]",
        errors=("log_policies[0].pattern: required",),
    ),
    Case(
        "legacy_log_action_of_another_type",
        "log_policies: [{pattern: a, action: {type: send_webhook}}]",
        errors=("log_policies[0].action.type: expected one of cancel_retries, exclude_node",),
    ),
    Case(
        "s3_prefix_leaving_the_bucket_path",
        S3 + "prefix: ../elsewhere}",
        errors=("checkpoint_storage.prefix: must not contain '..' as a path part",),
    ),
    Case(
        "gcs_prefix_leaving_the_bucket_path",
        "checkpoint_storage: {type: gcs, bucket: b, prefix: a/../../b}",
        errors=("checkpoint_storage.prefix: must not contain '..'",),
    ),
    Case(
        "relative_storage_path_escaping_host_path",
        SHARED + "storage_path: a/../../x}",
        errors=("checkpoint_storage.storage_path: must be a relative directory or a subdir",),
    ),
    Case(
        "absolute_storage_path_outside_host_path",
        SHARED + "storage_path: /elsewhere}",
        errors=("checkpoint_storage.storage_path: must be a relative directory or a subdir",),
    ),
    Case(
        "profiling_ending_before_it_begins",
        "profiling: {enabled: true, begin_on_batch: 100, end_after_batch: 1}",
        errors=("profiling.end_after_batch: must not be less than begin_on_batch (100)",),
    ),
    Case(
        "azure_connection_string_with_credential",
        AZURE + "connection_string: cs, credential: k}",
        errors=("checkpoint_storage.credential: must not be set with connection_string",),
    ),
    Case(
        "memory_size_with_a_binary_prefix_and_no_b",
        "resources: {shm_size: 1 gi}",
        errors=("resources.shm_size: expected a size in bytes or a string like",),
    ),
    Case(
        "memory_size_with_two_spaces",
        "resources: {shm_size: 1  g}",
        errors=("resources.shm_size: expected a size",),
    ),
    Case(
        "zero_max_length",
        "searcher: {name: single, metric: x, max_length: {batches: 0}}",
        errors=("searcher.max_length.batches: must be >= 1",),
    ),
    Case(
        "zero_bare_max_length",
        "searcher: {name: single, metric: x, max_length: 0}",
        errors=("searcher.max_length: must be >= 1",),
    ),
    Case(
        "grid_over_a_range_inside_a_list_without_count",
        GRID + "hyperparameters: {layers: [10, {type: const, val: a},"
        " {type: int, minval: 1, maxval: 2}], g: {d: {type: double, minval: 0, maxval: 1}}}",
        errors=(
            "hyperparameters.layers[2].count: required by the grid searcher",
            "hyperparameters.g.d.count: required by the grid searcher",
        ),
    ),
    Case(
        "declarations_inside_lists_are_checked_where_they_are",
        "hyperparameters: {nest: [[{type: categorical}], {one: {b: [{type: int, minval: 2,"
        " maxval: 1}]}}]}",
        errors=(
            "hyperparameters.nest[0][0].vals: required",
            "hyperparameters.nest[1].one.b[0].minval: must be less than maxval",
        ),
    ),
    Case(
        "pod_spec_configuring_the_task_container",
        "environment: {pod_spec: {spec: {containers: [{name: sidecar},"
        " {name: determined-container}]}}}",
        errors=("environment.pod_spec.spec.containers[1]: the determined-container container",),
    ),
    Case(
        "data_layer_cache_with_one_path_only",
        "data_layer: {type: gcs, bucket: b, local_cache_host_path: /h}",
        errors=("data_layer.local_cache_container_path: required when local_cache_host_path",),
    ),
    Case(
        "data_layer_of_an_unknown_type",
        "data_layer: {type: ftp, host: h}",
        errors=("data_layer.type: expected one of shared_fs, s3, gcs",),
    ),
    Case(
        "retention_policy_out_of_range",
        "retention_policy: {log_retention_days: -2}",
        errors=("retention_policy.log_retention_days: must be between -1 and 32767",),
    ),
    Case(
        "webhook_ids_that_are_not_integers",
        "integrations: {webhooks: {webhook_id: [one]}}",
        errors=("integrations.webhooks.webhook_id[0]: expected an integer",),
    ),
    Case(
        "unknown_keys_in_kept_sections",
        "security: {kerberos: {config_file: x, realm: y}}\nslurm: {sbatch_args: -N1}",
        errors=(
            "security.kerberos.realm: unknown key",
            "slurm.sbatch_args: expected a list",
        ),
    ),
    Case(
        "searchers_determined_no_longer_runs_check_the_shared_fields",
        "searcher: {name: adaptive_simple, metric: 3, max_trials: 2, source_trial_id: 0}",
        errors=(
            "searcher.metric: expected a string, got an integer (3)",
            "searcher.source_trial_id: must be >= 1",
        ),
    ),
    Case(
        "async_halving_without_num_rungs",
        "searcher: {name: async_halving, metric: x, max_trials: 2, max_length: 10}",
        errors=("searcher.num_rungs: required",),
    ),
    # -- the master's defaults, merged by Determined's rules -----------------------------------
    Case(
        "storage_of_another_type_keeps_only_the_defaults_retention_counts",
        SHARED + "save_trial_best: 1}",
        defaults={"checkpoint_storage": {"type": "s3", "bucket": "b", "save_trial_latest": 10}},
        filled={
            "checkpoint_storage": {
                "type": "shared_fs",
                "host_path": "/mnt/ckpt",
                "storage_path": None,
                "propagation": "rprivate",
                "save_experiment_best": 0,
                "save_trial_best": 1,
                "save_trial_latest": 10,
            }
        },
    ),
    Case(
        "storage_without_a_type_merges_into_the_defaults",
        "checkpoint_storage: {save_experiment_best: 3}",
        defaults={"checkpoint_storage": {"type": "gcs", "bucket": "w", "save_trial_best": 10}},
        filled={
            "checkpoint_storage.bucket": "w",
            "checkpoint_storage.save_experiment_best": 3,
            "checkpoint_storage.save_trial_best": 10,
        },
    ),
    Case(
        "searcher_of_another_name_keeps_the_defaults_metric_and_source",
        "searcher: {name: random, max_trials: 10}",
        defaults={
            "searcher": {
                "name": "grid",
                "metric": "sae",
                "max_concurrent_trials": 2,
                "source_checkpoint_uuid": "u",
            }
        },
        filled={
            "searcher.metric": "sae",
            "searcher.source_checkpoint_uuid": "u",
            "searcher.max_concurrent_trials": 16,
        },
    ),
    Case(
        "devices_append_unless_the_container_path_is_taken",
        "resources: {devices: ['/qwer:/qwer', {host_path: /asdf, container_path: /asdf}]}",
        defaults={
            "resources": {
                "devices": [
                    {"host_path": "/zxcv", "container_path": "/zxcv"},
                    {"host_path": "/not_asdf", "container_path": "/asdf"},
                ]
            }
        },
        filled={
            "resources.devices": [
                {"host_path": "/qwer", "container_path": "/qwer", "mode": "mrw"},
                {"host_path": "/asdf", "container_path": "/asdf", "mode": "mrw"},
                {"host_path": "/zxcv", "container_path": "/zxcv", "mode": "mrw"},
            ]
        },
    ),
    Case(
        "declared_hyperparameters_are_taken_whole",
        "hyperparameters: {n: {type: int, minval: 10, maxval: 100}}",
        defaults={"hyperparameters": {"n": {"type": "int", "minval": 1, "maxval": 5, "count": 5}}},
        filled={"hyperparameters.n": {"type": "int", "minval": 10, "maxval": 100, "count": None}},
    ),
    Case(
        "nested_hyperparameter_groups_merge",
        "hyperparameters: {transformer: {backbone: bert}, head: null}",
        defaults={"hyperparameters": {"transformer": {"task": "lm"}, "head": {"size": 3}}},
        filled={
            "hyperparameters.transformer.backbone.val": "bert",
            "hyperparameters.transformer.task.val": "lm",
            "hyperparameters.head": {"type": "const", "val": None},
        },
    ),
    Case(
        "log_policies_follow_the_defaults_and_pool_their_actions",
        "log_policies: [{pattern: b, action: {type: cancel_retries}}, {pattern: c, actions: []}]",
        defaults={
            "log_policies": [
                {"pattern": "a", "actions": ["cancel_retries"]},
                {"pattern": "b", "action": {"type": "exclude_node"}},
            ]
        },
        filled={
            "log_policies": [
                {"pattern": "a", "actions": ["cancel_retries"]},
                {"pattern": "b", "actions": ["cancel_retries", "exclude_node"]},
                {"pattern": "c", "actions": []},
                *DETERMINED_LOG_POLICIES,
            ]
        },
    ),
    Case(
        "data_layer_of_another_type_replaces_the_default",
        "data_layer: {type: s3, bucket: asdf}",
        defaults={"data_layer": {"type": "gcs", "bucket": "zxcv", "bucket_directory_path": "/d"}},
        filled={"data_layer": {"type": "s3", "bucket": "asdf"}},
    ),
]


def parse(case: Case) -> dict[str, Any]:
    raw = {**MINIMAL, **load_yaml(textwrap.dedent(case.snippet))}
    return parse_experiment_config(raw, case.defaults).to_dict()


@pytest.mark.parametrize("case", [c for c in CASES if not c.errors], ids=lambda c: c.name)
def test_valid_config_fills_in_as_determined_does(case: Case) -> None:
    config = parse(case)
    for dotted, value in (case.filled or {}).items():
        assert at(config, dotted) == value, dotted


@pytest.mark.parametrize("case", [c for c in CASES if c.errors], ids=lambda c: c.name)
def test_invalid_config_names_each_problem_with_its_path(case: Case) -> None:
    with pytest.raises(InvalidConfig) as refused:
        parse(case)
    for expected in case.errors:
        assert any(e.startswith(expected) for e in refused.value.errors), refused.value.errors
    assert len(refused.value.errors) == len(case.errors), refused.value.errors


def test_the_master_notes_the_sections_pydet_does_not_act_on() -> None:
    text = "slurm: {slots_per_node: 2}\nretention_policy: {log_retention_days: 3}\n"
    config = parse_experiment_config({**MINIMAL, **load_yaml(text)})
    assert unused_settings(config) == ["slurm", "retention_policy"]
    assert unused_settings(parse_experiment_config(MINIMAL)) == []
    acted_on = (
        "log_policies: [{pattern: OOM, actions: [cancel_retries]}]\n"
        "integrations: {webhooks: {webhook_name: [team]}}\n"
    )
    assert unused_settings(parse_experiment_config({**MINIMAL, **load_yaml(acted_on)})) == []
    pachyderm = "integrations: {pachyderm: {dataset: {repo: r}}}\n"
    assert unused_settings(parse_experiment_config({**MINIMAL, **load_yaml(pachyderm)})) == [
        "integrations"
    ]
