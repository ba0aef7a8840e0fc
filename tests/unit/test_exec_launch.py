from __future__ import annotations

from typing import Any

import pytest

from determined.exec.launch import InvalidEntrypoint, entrypoint_argv, is_legacy_trial


def test_a_string_runs_in_a_shell() -> None:
    assert entrypoint_argv("python3 train.py --lr 0.1") == ["sh", "-c", "python3 train.py --lr 0.1"]


def test_a_list_is_the_argv() -> None:
    assert entrypoint_argv(["python3", "train.py"]) == ["python3", "train.py"]


def test_a_legacy_trial_class_runs_under_torch_distributed() -> None:
    assert entrypoint_argv("model_def:MyTrial", python="py") == [
        "py", "-m", "determined.launch.torch_distributed", "--trial", "model_def:MyTrial"
    ]  # fmt: skip


@pytest.mark.parametrize("text", ["model_def:MyTrial", "pkg.sub.model:Trial_2", "dir/model:T"])
def test_legacy_trial_forms(text: str) -> None:
    assert is_legacy_trial(text)


@pytest.mark.parametrize(
    "text", ["python3 train.py", "model_def:MyTrial --x", "http://host:80", "a:1", "./run.sh"]
)
def test_commands_are_not_mistaken_for_trial_classes(text: str) -> None:
    assert not is_legacy_trial(text)


@pytest.mark.parametrize("entrypoint", [None, "", "  ", [], ["python3", 3], {"cmd": "x"}])
def test_missing_or_malformed_entrypoints_are_refused(entrypoint: Any) -> None:
    with pytest.raises(InvalidEntrypoint):
        entrypoint_argv(entrypoint)
