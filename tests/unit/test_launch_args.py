from __future__ import annotations

import pytest

from determined.launch._args import (
    Flag,
    LaunchArgs,
    UsageError,
    given,
    merge_flags,
    parse,
    parse_cli,
)


def test_script_without_separator_has_no_overrides() -> None:
    assert parse(["python3", "train.py", "--lr", "0.1"]) == LaunchArgs(
        overrides=[], script=["python3", "train.py", "--lr", "0.1"]
    )


def test_words_before_the_first_separator_are_overrides() -> None:
    parsed = parse(["--nproc_per_node", "4", "--", "python3", "train.py", "--", "x"])
    assert parsed.overrides == ["--nproc_per_node", "4"]
    assert parsed.script == ["python3", "train.py", "--", "x"]


def test_a_scripts_own_separator_is_kept_when_no_overrides_come_first() -> None:
    parsed = parse(["python3", "train.py", "--", "--epochs", "3"])
    assert parsed.overrides == []
    assert parsed.script == ["python3", "train.py", "--", "--epochs", "3"]


def test_a_leading_separator_means_empty_overrides() -> None:
    assert parse(["--", "train.sh"]) == LaunchArgs(overrides=[], script=["train.sh"])


def test_trial_class_runs_the_harness() -> None:
    parsed = parse(["--fusion-threshold-mb", "1", "--", "--trial", "model_def:MyTrial"])
    assert parsed.trial == "model_def:MyTrial"
    assert parsed.overrides == ["--fusion-threshold-mb", "1"]
    assert parsed.worker("py") == ["py", "-m", "determined.exec.harness", "model_def:MyTrial"]


def test_trial_equals_form_is_accepted() -> None:
    assert parse(["--trial=model_def:T"]).trial == "model_def:T"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--"],
        ["--nproc_per_node", "2", "--"],
        ["--trial"],
        ["--trial", "model_def:T", "train.py"],
        ["--nproc_per_node", "2", "train.py"],
    ],
)
def test_bad_command_lines_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        parse(argv)


def test_parse_cli_prints_usage_and_gives_2_on_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_cli([], prog="determined.launch.x", overrides_name="X_OVERRIDES") == 2
    err = capsys.readouterr().err
    assert "usage: python3 -m determined.launch.x [[X_OVERRIDES...] --]" in err
    assert "error: no training command" in err


def test_parse_cli_help_gives_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_cli(["--help"], prog="p", overrides_name="O") == 0
    assert "usage:" in capsys.readouterr().out


def test_user_flags_replace_ours_in_either_form_and_spelling() -> None:
    ours = [Flag(("--nproc_per_node", "--nproc-per-node"), "2"), Flag(("--nnodes",), "1")]
    assert merge_flags(ours, ["--nproc-per-node=4"]) == ["--nnodes", "1", "--nproc-per-node=4"]
    assert merge_flags(ours, ["--nproc_per_node", "4"]) == [
        "--nnodes",
        "1",
        "--nproc_per_node",
        "4",
    ]
    assert merge_flags(ours, []) == ["--nproc_per_node", "2", "--nnodes", "1"]


def test_switches_render_without_value_and_short_aliases_match() -> None:
    ours = [Flag(("--no_ssh",)), Flag(("-np", "--num-proc"), "8")]
    assert merge_flags(ours, ["--num-proc", "2"]) == ["--no_ssh", "--num-proc", "2"]
    assert given(["-np", "2"], "-np")
    assert not given(["2"], "-np")
