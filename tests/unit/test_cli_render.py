from __future__ import annotations

import datetime
import json

import pytest

from determined.api.gen import v1
from determined.common import structs, timestamps
from pydet.cli import agent, experiment, render

START = datetime.datetime(2024, 5, 6, 7, 8, 9).timestamp()  # local time, as the CLI shows it
START_TEXT = "2024-05-06 07:08:09"


def test_times_are_local_wall_clock_and_blank_when_unset() -> None:
    assert render.local_time(START) == "2024-05-06 07:08:09"
    assert render.local_time(None) == ""
    assert render.local_time(0.0) == ""


def test_experiment_table_has_determineds_columns_and_look() -> None:
    e = v1.Experiment(
        id=7,
        name="mnist",
        state=v1.State.COMPLETED,
        progress=0.5,
        start_time=timestamps.to_datetime(START),
        end_time=timestamps.to_datetime(START + 61),
        resource_pool="default",
        username="alice",
    )
    lines = render.table(render.EXPERIMENT_HEADERS, [render.experiment_row(e)]).splitlines()
    assert [c.strip() for c in lines[0].split("|")] == list(render.EXPERIMENT_HEADERS)
    assert set(lines[1]) <= {"-", "+"}
    cells = [c.strip() for c in lines[2].split("|")]
    assert cells == [
        "7",
        "alice",
        "mnist",
        "",
        "COMPLETED",
        "50.0%",
        "2024-05-06 07:08:09",
        "2024-05-06 07:09:10",
        "default",
    ]


def test_running_trial_row_leaves_end_and_best_validation_blank() -> None:
    t = v1.Trial(
        id=3,
        state=v1.State.ACTIVE,
        phase=v1.TrialPhase.AWAITING_VERDICT,
        hparams=structs.struct({"lr": 0.1, "layers": {"n": 2}}),
        total_batches_processed=400,
        restarts=1,
        start_time=timestamps.to_datetime(START),
    )
    row = render.trial_row(t)
    assert row == [
        3,
        "ACTIVE",
        "AWAITING_VERDICT",
        '{"lr": 0.1, "layers": {"n": 2}}',
        400,
        1,
        "",
        "",  # no log signal
        START_TEXT,
        "",
    ]


def test_json_uses_plain_state_names_and_decodes_json_fields() -> None:
    t = v1.Trial(
        id=3,
        experiment_id=1,
        state=v1.State.COMPLETED,
        phase=v1.TrialPhase.COMPLETED,
        hparams=structs.struct({"lr": 0.1, "layers": 2}),
        seed=123456789012,
        best_validation_metric=0.25,
    )
    out = json.loads(render.to_json([render.message_dict(t)]))
    assert out[0]["state"] == "COMPLETED"
    assert out[0]["phase"] == "COMPLETED"
    assert out[0]["hparams"] == {"lr": 0.1, "layers": 2}  # a Struct's whole numbers as ints
    assert out[0]["seed"] == 123456789012  # a number, not proto-JSON's string for int64
    assert out[0]["best_validation_metric"] == 0.25
    assert out[0]["end_time"] is None
    assert out[0]["latest_validation"] is None


def test_json_of_a_state_the_cli_does_not_know_still_renders() -> None:
    e = v1.Experiment(id=1, state=v1.State(99))
    assert json.loads(render.to_json(render.message_dict(e)))["state"] == "UNKNOWN(99)"
    assert render.state_name(v1.State(99)) == "UNKNOWN(99)"


def test_agent_row_counts_used_slots() -> None:
    a = v1.Agent(
        id="node-0",
        addresses=["10.0.0.5"],
        resource_pools=["default"],
        runtime="process",
        connected=True,
        enabled=True,
        slots={
            "0": v1.Slot(id="0", allocation_id="alloc-1"),
            "1": v1.Slot(id="1"),
            "2": v1.Slot(id="2"),
        },
    )
    assert agent.agent_row(a) == ["node-0", "10.0.0.5", "default", "1/3", "process", True, True]
    rows = agent.slot_rows(a)
    assert [r[5] for r in rows] == ["alloc-1", "FREE", "FREE"]


def test_checkpoint_row_shows_size_and_metric() -> None:
    c = v1.Checkpoint(
        uuid="abc",
        training=v1.CheckpointTrainingMetadata(trial_id=2, searcher_metric=0.125),
        steps_completed=100,
        state=v1.CheckpointState.COMPLETED,
        size=3 * 1024 * 1024,
        resources={"model.pt": 3 * 1024 * 1024},
        report_time=timestamps.to_datetime(START),
    )
    assert render.checkpoint_row(c) == [
        2,
        100,
        "COMPLETED",
        "0.125",
        "abc",
        "model.pt",
        "3.0 MiB",
    ]


@pytest.mark.parametrize(
    ("rank", "message", "expected"),
    [
        (None, "loading data\n", "[2024-01-02T03:04:05.500000Z] loading data"),
        (0, "step 1", "[2024-01-02T03:04:05.500000Z] [rank=0] step 1"),
        (3, "done\r\n", "[2024-01-02T03:04:05.500000Z] [rank=3] done"),
    ],
)
def test_log_lines_read_like_determineds(rank: int | None, message: str, expected: str) -> None:
    ts = datetime.datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=datetime.UTC)
    log = v1.TaskLog(rank_id=rank, message=message, timestamp=ts)
    assert render.log_line(log) == expected


def test_bytes_are_human_sized() -> None:
    assert render.human_bytes(512) == "512 B"
    assert render.human_bytes(2048) == "2.0 KiB"
    assert render.human_bytes(5 * 1024**4) == "5120.0 GiB"


def _trial(trial_id: int, best: float | None) -> v1.Trial:
    hparams = structs.struct({"lr": 0.1, "model": {"hidden": 64}})
    return v1.Trial(id=trial_id, best_validation_metric=best, hparams=hparams)


@pytest.mark.parametrize(("smaller_is_better", "winner"), [(True, 2), (False, 3)])
def test_best_trial_follows_the_searcher_direction(smaller_is_better: bool, winner: int) -> None:
    trials = [_trial(1, 0.5), _trial(2, 0.1), _trial(3, 0.9), _trial(4, None)]
    best = experiment.best_trial(trials, smaller_is_better=smaller_is_better)
    assert best is not None and best.id == winner


def test_best_trial_is_none_before_any_validation_and_earliest_on_a_tie() -> None:
    assert experiment.best_trial([_trial(1, None)], smaller_is_better=True) is None
    best = experiment.best_trial([_trial(5, 0.2), _trial(4, 0.2)], smaller_is_better=True)
    assert best is not None and best.id == 4


def test_best_trial_text_names_the_metric_and_flattens_hyperparameters() -> None:
    text = experiment.best_trial_text(_trial(7, 0.0812), "val_loss")
    assert text.splitlines() == ["Best trial 7: val_loss 0.0812", "  lr: 0.1", "  model.hidden: 64"]
