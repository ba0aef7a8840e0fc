"""`det experiment create` up to the network: overrides, validation, packing, in that order."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from determined.common import errors
from pydet.cli import config, rpc
from pydet.cli.__main__ import main

GOOD = """\
# the user's comment survives when nothing is overridden
name: minimal
entrypoint: python3 train.py
searcher:
  name: single
  metric: loss
  max_length: {batches: 5}
"""


def closed_port() -> int:
    """A loopback port with nothing listening (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "train.py").write_text("print('hi')\n")
    (tmp_path / "const.yaml").write_text(GOOD)
    return tmp_path


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the CLI went to the network before validating locally")

    monkeypatch.setattr(rpc, "run", refuse)


def override(text: str) -> config.Override:
    return config.parse_override(text)


def test_overrides_set_nested_keys_with_yaml_typed_values() -> None:
    base = {"name": "x", "resources": {"slots_per_trial": 1}}
    result = config.apply_overrides(
        base,
        [
            override("resources.slots_per_trial=4"),
            override("resources.priority=10"),
            override("hyperparameters.lr=0.01"),
            override("hyperparameters.opt.kind=adam"),
            override("debug=true"),
            override("description="),
            override("labels=[a, b]"),
            override("searcher.metric=a=b"),
        ],
    )
    assert result == {
        "name": "x",
        "resources": {"slots_per_trial": 4, "priority": 10},
        "hyperparameters": {"lr": 0.01, "opt": {"kind": "adam"}},
        "debug": True,
        "description": None,
        "labels": ["a", "b"],
        "searcher": {"metric": "a=b"},
    }
    assert base == {"name": "x", "resources": {"slots_per_trial": 1}}  # the input is untouched


def test_override_through_a_scalar_is_a_clear_error() -> None:
    with pytest.raises(errors.InvalidArgument, match="name is str, not a mapping"):
        config.apply_overrides({"name": "x"}, [override("name.first=y")])


def test_config_without_overrides_is_submitted_as_written(project: Path) -> None:
    assert config.load(str(project / "const.yaml")) == GOOD


def test_config_with_overrides_is_submitted_with_them(project: Path) -> None:
    text = config.load(str(project / "const.yaml"), [override("resources.slots_per_trial=2")])
    data = yaml.safe_load(text)
    assert data["resources"] == {"slots_per_trial": 2}
    assert data["searcher"]["metric"] == "loss"


def test_missing_config_file_is_a_clear_error(
    project: Path, no_network: None, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = project / "nope.yaml"
    assert main(["e", "create", str(missing), str(project / "ctx")]) == 1
    assert capsys.readouterr().err == f"Error: config file {missing} does not exist\n"


def test_bad_config_fails_locally_before_any_network_call(
    project: Path, no_network: None, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = project / "bad.yaml"
    bad.write_text(GOOD.replace("name: single", "name: random\n  max_trials: 0"))
    code = main(["-m", f"127.0.0.1:{closed_port()}", "e", "create", str(bad), str(project / "ctx")])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: invalid experiment config {bad}:\n")
    assert "  searcher.max_trials: must be >= 1\n" in err
    assert "Traceback" not in err


def test_config_error_wins_over_a_dead_master_without_mocks(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = project / "bad.yaml"
    bad.write_text(GOOD + "resourses: {slots_per_trial: 2}\n")
    code = main(["-m", f"127.0.0.1:{closed_port()}", "e", "create", str(bad), str(project / "ctx")])
    assert code == 1
    err = capsys.readouterr().err
    assert "resourses: unknown key" in err
    assert "cannot reach the master" not in err


def test_every_problem_is_listed_on_its_own_line(
    project: Path, no_network: None, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = project / "bad.yaml"
    bad.write_text("name: x\nsearcher: {name: random, max_trials: 0}\n")
    assert main(["e", "create", str(bad), str(project / "ctx")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"Error: invalid experiment config {bad}:"
    assert len(lines) >= 3  # entrypoint, searcher.metric, searcher.max_trials at least
    assert all(line.startswith("  ") and ": " in line for line in lines[1:])


def test_override_that_breaks_the_config_names_the_field(
    project: Path, no_network: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["e", "create", str(project / "const.yaml"), str(project / "ctx")]
    assert main([*argv, "--config", "resources.slots_per_trial=-1"]) == 1
    assert "  resources.slots_per_trial: " in capsys.readouterr().err


def test_yaml_syntax_error_is_one_clear_message(
    project: Path, no_network: None, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = project / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert main(["e", "create", str(bad), str(project / "ctx")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: invalid experiment config {bad}:\n  invalid YAML")
    assert "Traceback" not in err


def test_oversized_context_fails_before_upload(
    project: Path, no_network: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with open(project / "ctx" / "data.bin", "wb") as f:
        f.truncate(96 * 1024 * 1024)  # sparse: costs no disk, still counts as 96 MiB
    assert main(["e", "create", str(project / "const.yaml"), str(project / "ctx")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: context directory")
    assert ".detignore" in err


def test_missing_context_directory_is_a_clear_error(
    project: Path, no_network: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["e", "create", str(project / "const.yaml"), str(project / "nope")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_test_mode_failing_means_the_real_experiment_is_not_created(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No master is reachable: the shortened run cannot even be submitted, so nothing is.
    argv = ["-m", "127.0.0.1:9", "e", "create", str(project / "const.yaml")]
    assert main([*argv, str(project / "ctx"), "-t"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the master" in err


def test_create_without_a_context_directory_uploads_only_the_includes(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from determined.common.context import context_files
    from pydet.cli import create

    sent: list[bytes] = []

    def submit(master: str | None, text: str, context: bytes, **kwargs: Any) -> int:
        sent.append(context)
        return 0

    monkeypatch.setattr(create, "_submit", submit)
    assert main(["e", "create", str(project / "const.yaml")]) == 0
    included = ["e", "create", str(project / "const.yaml"), "-i", str(project / "ctx" / "train.py")]
    assert main(included) == 0
    assert [name for name, _ in context_files(sent[0])] == []
    assert [name for name, _ in context_files(sent[1])] == ["train.py"]
