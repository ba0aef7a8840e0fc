"""How many of Determined's own experiment-config schema test cases pydet's parser judges
as Determined does: prints a table of the cases that disagree and the percentage that agree.

    python bench/expconf_conformance.py DIR

DIR holds the YAML files of Determined's ``schemas/test_cases/v0`` (not part of this
repository: fetch them from Determined's). Each case says which schemas accept it
(``matches``, ``sane_as``, ``complete_as``) and which reject it (``errors``,
``sanity_errors``, ``completeness_errors``). pydet parses
whole experiment configs, so a case is measured for the schemas that stand for a part of
one: the case is put where that part goes in a minimal config (a searcher as ``searcher``,
a length as ``searcher.max_length``, ...) and pydet's verdict (accepted or refused) is
compared with Determined's. Schemas of no config part (``check-*`` helpers, test structs)
are not measured.
"""

from __future__ import annotations

import copy
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import yaml

from determined.common.expconf import InvalidConfig, parse_experiment_config

PREFIX = "http://determined.ai/schemas/expconf/v0/"
STORAGE = {"type": "shared_fs", "host_path": "/tmp"}  # the master's default storage
SINGLE = {"name": "single", "metric": "loss", "max_length": {"batches": 1000}}


def minimal(**parts: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"entrypoint": "python3 train.py", "searcher": dict(SINGLE)}
    config.update(parts)
    return config


def _searcher(case: Any) -> dict[str, Any]:
    return minimal(searcher=case)


def _length(case: Any) -> dict[str, Any]:
    # A length where Determined takes any non-negative one (min_validation_period's default
    # is {batches: 0}); check-positive-length.json is what a searcher's max_length adds.
    return minimal(min_validation_period=case, records_per_epoch=100)


def _positive_length(case: Any) -> dict[str, Any]:
    return minimal(searcher={**SINGLE, "max_length": case}, records_per_epoch=100)


def _sane(case: Any) -> Any:
    # Determined's sanity check of a whole config does not ask for the parts a complete
    # config needs (a searcher, an entrypoint): the case's keys replace a minimal config's.
    return minimal(**case) if isinstance(case, dict) else case


def _hparam(case: Any) -> dict[str, Any]:
    return minimal(hyperparameters={"h": case})


def _grid(case: Any) -> dict[str, Any]:
    return minimal(hyperparameters=case, searcher={**SINGLE, "name": "grid"})


# Where each schema's cases go in a config.
EMBED: dict[str, Callable[[Any], Any]] = {
    "experiment.json": _sane,
    "check-positive-length.json": _positive_length,
    "searcher.json": _searcher,
    "length.json": _length,
    "hyperparameters.json": lambda case: minimal(hyperparameters=case),
    "hyperparameter.json": _hparam,
    "check-grid-hyperparameter.json": _grid,
    "bind-mount.json": lambda case: minimal(bind_mounts=[case]),
    "bind-mounts.json": lambda case: minimal(bind_mounts=case),
    "environment.json": lambda case: minimal(environment=case),
    "environment-variables.json": lambda case: minimal(environment={"environment_variables": case}),
    "environment-image.json": lambda case: minimal(environment={"image": case}),
    "resources.json": lambda case: minimal(resources=case),
    "device.json": lambda case: minimal(resources={"devices": [case]}),
    "devices.json": lambda case: minimal(resources={"devices": case}),
    "checkpoint-storage.json": lambda case: minimal(checkpoint_storage=case),
    "log-policies.json": lambda case: minimal(log_policies=case),
    "log-policy.json": lambda case: minimal(log_policies=[case]),
    "reproducibility.json": lambda case: minimal(reproducibility=case),
    "entrypoint.json": lambda case: minimal(entrypoint=case),
    "registry-auth.json": lambda case: minimal(environment={"registry_auth": case}),
    "data-layer.json": lambda case: minimal(data_layer=case),
    "security.json": lambda case: minimal(security=case),
    "profiling.json": lambda case: minimal(profiling=case),
}
for _kind in ("single", "random", "grid", "async-halving", "adaptive-asha", "custom"):
    EMBED[f"searcher-{_kind}.json"] = _searcher
for _kind in ("int", "double", "log", "categorical", "const"):
    EMBED[f"hyperparameter-{_kind}.json"] = _hparam
for _kind in ("shared-fs", "s3", "gcs", "azure", "directory"):
    EMBED[f"{_kind}.json"] = lambda case: minimal(checkpoint_storage=case)


# Cases where pydet differs from Determined on purpose, with the reason.
DELIBERATE = {
    "records_per_epoch conditional (invalid, zero)": (
        "pydet takes epoch lengths without records_per_epoch: a PyTorchTrial epoch is its "
        "data loader's length, and Core API code counts epochs itself"
    ),
    "records_per_epoch conditional (invalid, missing)": "as above",
}


def verdicts(case: dict[str, Any]) -> dict[str, bool]:
    """Schema name -> whether Determined accepts the case there."""
    out: dict[str, bool] = {}
    for key in ("matches", "sane_as", "complete_as"):
        for url in case.get(key) or []:
            out[url.removeprefix(PREFIX)] = True
    for key in ("errors", "sanity_errors", "completeness_errors"):
        for url in case.get(key) or {}:
            out[url.removeprefix(PREFIX)] = False
    return out


def pydet_accepts(config: Any) -> tuple[bool, str]:
    try:
        parse_experiment_config(copy.deepcopy(config), {"checkpoint_storage": STORAGE})
    except InvalidConfig as e:
        return False, "; ".join(e.errors)
    return True, ""


def measure(directory: pathlib.Path) -> tuple[int, int, list[str]]:
    agree = total = 0
    rows = []
    for path in sorted(directory.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text()) or []:
            for schema, accepted in sorted(verdicts(case).items()):
                embed = EMBED.get(schema)
                if embed is None:
                    continue
                total += 1
                ours, why = pydet_accepts(embed(case.get("case")))
                if ours == accepted:
                    agree += 1
                    continue
                want = "accepts" if accepted else "refuses"
                row = f"{path.name}: {case['name']!r} [{schema}] Determined {want}; {why}"
                reason = DELIBERATE.get(case["name"])
                rows.append(f"{row} (deliberate: {reason})" if reason else row)
    return agree, total, rows


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    agree, total, rows = measure(pathlib.Path(sys.argv[1]))
    for row in rows:
        print(row)
    share = 100 * agree / max(1, total)
    print(f"{agree}/{total} cases judged as Determined judges them: {share:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
