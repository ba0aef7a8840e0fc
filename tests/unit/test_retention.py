from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pydet.master.experiments.retention import (
    CheckpointRecord,
    RetentionPolicy,
    TrialRecord,
    checkpoints_to_delete,
)
from tests.unit.search_sim import config

C = CheckpointRecord


def ckpts() -> list[CheckpointRecord]:
    # Trial 1: losses 0.5 @100, 0.2 @200, 0.4 @300. Trial 2: 0.3 @100, 0.1 @200, none @300.
    return [
        C("1a", 1, 100, 0.5),
        C("1b", 1, 200, 0.2),
        C("1c", 1, 300, 0.4),
        C("2a", 2, 100, 0.3),
        C("2b", 2, 200, 0.1),
        C("2c", 2, 300, None),
    ]


ENDED = [TrialRecord(1, "COMPLETED"), TrialRecord(2, "COMPLETED")]


def test_defaults_keep_each_trials_best_and_latest() -> None:
    doomed = checkpoints_to_delete(ckpts(), ENDED, RetentionPolicy())
    assert doomed == {"1a", "2a"}


def test_nothing_kept_when_every_count_is_zero_and_trials_ended() -> None:
    policy = RetentionPolicy(save_experiment_best=0, save_trial_best=0, save_trial_latest=0)
    assert checkpoints_to_delete(ckpts(), ENDED, policy) == {c.uuid for c in ckpts()}


def test_experiment_best_ranks_across_trials() -> None:
    policy = RetentionPolicy(save_experiment_best=2, save_trial_best=0, save_trial_latest=0)
    assert checkpoints_to_delete(ckpts(), ENDED, policy) == {"1a", "1c", "2a", "2c"}


def test_larger_is_better_flips_the_ranking() -> None:
    policy = RetentionPolicy(
        save_experiment_best=1, save_trial_best=0, save_trial_latest=0, smaller_is_better=False
    )
    assert checkpoints_to_delete(ckpts(), ENDED, policy) == {c.uuid for c in ckpts()} - {"1a"}


def test_trial_latest_keeps_the_n_most_trained() -> None:
    policy = RetentionPolicy(save_trial_best=0, save_trial_latest=2)
    assert checkpoints_to_delete(ckpts(), ENDED, policy) == {"1a", "2a"}


def test_a_running_trial_keeps_its_latest_checkpoint_whatever_the_policy() -> None:
    policy = RetentionPolicy(save_experiment_best=0, save_trial_best=0, save_trial_latest=0)
    trials = [TrialRecord(1, "ACTIVE"), TrialRecord(2, "COMPLETED")]
    doomed = checkpoints_to_delete(ckpts(), trials, policy)
    assert "1c" not in doomed and {"1a", "1b", "2a", "2b", "2c"} <= doomed


def test_a_running_trial_keeps_the_checkpoint_it_started_from_in_another_trial() -> None:
    # Trial 3 was forked (PBT) from trial 1's 1a and has not checkpointed yet.
    trials = [*ENDED, TrialRecord(3, "ACTIVE", latest_checkpoint="1a")]
    doomed = checkpoints_to_delete(ckpts(), trials, RetentionPolicy())
    assert doomed == {"2a"}
    ended = [*ENDED, TrialRecord(3, "COMPLETED", latest_checkpoint="1a")]
    assert checkpoints_to_delete(ckpts(), ended, RetentionPolicy()) == {"1a", "2a"}


def test_checkpoints_being_written_or_already_deleted_are_left_alone() -> None:
    records = [*ckpts(), C("1d", 1, 400, 0.9, "ACTIVE"), C("1x", 1, 50, 0.0, "DELETED")]
    doomed = checkpoints_to_delete(records, ENDED, RetentionPolicy())
    assert doomed == {"1a", "2a"}


def test_a_checkpoint_without_a_metric_is_never_a_best() -> None:
    policy = RetentionPolicy(save_experiment_best=6, save_trial_best=6, save_trial_latest=0)
    assert checkpoints_to_delete(ckpts(), ENDED, policy) == {"2c"}


def test_policy_comes_from_checkpoint_storage_and_the_searcher() -> None:
    cfg = config(
        {"name": "single", "metric": "acc", "smaller_is_better": False},
        checkpoint_storage={
            "type": "shared_fs",
            "host_path": "/tmp",
            "save_experiment_best": 3,
            "save_trial_best": 0,
            "save_trial_latest": 2,
        },
    )
    assert RetentionPolicy.from_config(cfg) == RetentionPolicy(
        save_experiment_best=3, save_trial_best=0, save_trial_latest=2, smaller_is_better=False
    )
    assert RetentionPolicy.from_config(config({"name": "single"})) == RetentionPolicy()


records = st.lists(
    st.builds(
        CheckpointRecord,
        uuid=st.uuids().map(str),
        trial_id=st.integers(1, 4),
        steps_completed=st.integers(0, 50),
        metric=st.one_of(st.none(), st.floats(-10, 10, allow_nan=False)),
    ),
    max_size=25,
    unique_by=lambda c: c.uuid,
)


@settings(max_examples=150, deadline=None)
@given(
    records=records,
    running=st.sets(st.integers(1, 4)),
    counts=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
    smaller=st.booleans(),
)
def test_kept_sets_are_exactly_the_union_of_the_policy_rules(
    records: list[CheckpointRecord],
    running: set[int],
    counts: tuple[int, int, int],
    smaller: bool,
) -> None:
    exp_best, trial_best, trial_latest = counts
    policy = RetentionPolicy(
        save_experiment_best=exp_best,
        save_trial_best=trial_best,
        save_trial_latest=trial_latest,
        smaller_is_better=smaller,
    )
    trials = [TrialRecord(i, "ACTIVE" if i in running else "COMPLETED") for i in range(1, 5)]
    doomed = checkpoints_to_delete(records, trials, policy)
    kept = {c.uuid for c in records} - doomed
    sign = 1 if smaller else -1

    def better(a: CheckpointRecord, b: CheckpointRecord) -> bool:
        assert a.metric is not None and b.metric is not None
        return (sign * a.metric, -a.steps_completed, a.uuid) < (
            sign * b.metric,
            -b.steps_completed,
            b.uuid,
        )

    for c in records:
        mine = [o for o in records if o.trial_id == c.trial_id]
        later = sum(1 for o in mine if (-o.steps_completed, o.uuid) < (-c.steps_completed, c.uuid))
        should_keep = later < trial_latest or (c.trial_id in running and later == 0)
        if c.metric is not None:
            rank_exp = sum(1 for o in records if o.metric is not None and better(o, c))
            rank_trial = sum(1 for o in mine if o.metric is not None and better(o, c))
            should_keep |= rank_exp < exp_best or rank_trial < trial_best
        assert (c.uuid in kept) == should_keep, c
