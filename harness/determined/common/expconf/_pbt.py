"""The ``pbt`` searcher: population-based training.

``population_size`` trials train ``length_per_round`` each round, for ``num_rounds`` rounds.
After a round, the worst ``truncate_fraction`` of the population are closed and as many new
trials start from the checkpoints of the best, with hyperparameters perturbed as
``explore_function`` says (Determined's name; ``search_data`` is accepted for it too).
Values that cannot make sense are refused here, with the field named: a fraction outside
(0, 0.5] would close trials that are also copied, or never replace any.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from determined.common.expconf._lengths import Length, read_length
from determined.common.expconf._reader import Section, as_number


@dataclass(frozen=True, kw_only=True)
class PBTSearcher:
    """Population-based training: rounds of training, truncation and exploration."""

    name: ClassVar[Literal["pbt"]] = "pbt"
    metric: str
    smaller_is_better: bool = True
    source_trial_id: int | None = None
    source_checkpoint_uuid: str | None = None
    population_size: int
    num_rounds: int
    length_per_round: Length
    truncate_fraction: float
    resample_probability: float
    perturb_factor: float

    @property
    def max_length(self) -> Length:
        """What the last round trains to: every round adds ``length_per_round``."""
        return Length(self.length_per_round.unit, self.length_per_round.value * self.num_rounds)

    @property
    def replaced_per_round(self) -> int:
        return int(self.truncate_fraction * self.population_size)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "smaller_is_better": self.smaller_is_better,
            "source_trial_id": self.source_trial_id,
            "source_checkpoint_uuid": self.source_checkpoint_uuid,
            "population_size": self.population_size,
            "num_rounds": self.num_rounds,
            "length_per_round": self.length_per_round.to_dict(),
            "replace_function": {"truncate_fraction": self.truncate_fraction},
            "explore_function": {
                "resample_probability": self.resample_probability,
                "perturb_factor": self.perturb_factor,
            },
        }


def parse_pbt(
    sec: Section,
    *,
    smaller_is_better: bool,
    source_trial_id: int | None,
    source_checkpoint_uuid: str | None,
    source_experiment_id: int | None = None,
) -> PBTSearcher | None:
    """Reads the pbt-specific keys of ``searcher`` (the shared ones are read already)."""
    if source_experiment_id is not None:
        # A population starts from its members' checkpoints; another search's trials have
        # results but no place in this population's rounds.
        sec.problems.add(
            sec.at("source_experiment_id"),
            "pbt cannot be warm-started from another experiment (use source_trial_id or "
            "source_checkpoint_uuid to start every member from one checkpoint)",
        )
    metric = sec.required_string("metric")
    population_size = sec.required_integer("population_size", minimum=1)
    num_rounds = sec.required_integer("num_rounds", minimum=1)
    length = read_length(sec, "length_per_round", None, allow_bare=True, positive=True)
    if not sec.has("length_per_round"):
        sec.problems.add(sec.at("length_per_round"), "required")
    replace = sec.child("replace_function")
    truncate = _fraction(replace, "truncate_fraction", above_zero=True, most=0.5)
    replace.finish()
    if truncate is not None and population_size is not None:
        if int(truncate * population_size) < 1:
            sec.problems.add(
                replace.at("truncate_fraction"),
                f"{truncate} of population_size {population_size} replaces no trial in a "
                f"round; it must be at least 1/{population_size}",
            )
    if sec.has("explore_function") and sec.has("search_data"):
        sec.problems.add(sec.at("search_data"), "set either explore_function or search_data")
    explore = sec.child("search_data" if sec.has("search_data") else "explore_function")
    sec.raw("search_data")  # both names are known keys, whichever is used
    sec.raw("explore_function")
    resample = _fraction(explore, "resample_probability", above_zero=False, most=1.0)
    perturb = _fraction(explore, "perturb_factor", above_zero=False, most=1.0)
    explore.finish()
    if (
        metric is None
        or population_size is None
        or num_rounds is None
        or length is None
        or truncate is None
        or resample is None
        or perturb is None
    ):
        return None
    return PBTSearcher(
        metric=metric,
        smaller_is_better=smaller_is_better,
        source_trial_id=source_trial_id,
        source_checkpoint_uuid=source_checkpoint_uuid,
        population_size=population_size,
        num_rounds=num_rounds,
        length_per_round=length,
        truncate_fraction=truncate,
        resample_probability=resample,
        perturb_factor=perturb,
    )


def _fraction(sec: Section, key: str, *, above_zero: bool, most: float) -> float | None:
    """A required number within (0, most] or [0, most]."""
    path = sec.at(key)
    raw = sec.raw(key)
    if raw is None:
        sec.problems.add(path, "required")
        return None
    value = as_number(sec.problems, path, raw)
    if value is None:
        return None
    low = "(0" if above_zero else "[0"
    if value > most or value < 0 or (above_zero and value == 0):
        sec.problems.add(path, f"must be in {low}, {most}], got {raw}")
        return None
    return value
