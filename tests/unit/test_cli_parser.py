from __future__ import annotations

import argparse
import pathlib

import pytest

from determined.api.gen import v1
from pydet.cli import checkpoint, create, deploy, experiment, master, task, trial
from pydet.cli.__main__ import build_parser, main


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "func"),
    [
        (["experiment", "create", "c.yaml", "."], create.create),
        (["e", "create", "c.yaml", "."], create.create),
        (["e", "list"], experiment.list_experiments),
        (["e", "ls", "--all", "--json"], experiment.list_experiments),
        (["e", "describe", "1", "--json"], experiment.describe),
        (["e", "config", "1"], experiment.show_config),
        (["e", "list-trials", "1"], experiment.list_trials),
        (["e", "lt", "1", "--json"], experiment.list_trials),
        (["e", "list-checkpoints", "1"], checkpoint.list_checkpoints),
        (["e", "lc", "1", "--best", "2", "--csv"], checkpoint.list_checkpoints),
        (["e", "create", "c.yaml"], create.create),
        (["e", "download", "1", "--top-n", "2", "-o", "out"], experiment.download),
        (["checkpoint", "list", "1"], checkpoint.list_checkpoints),
        (["c", "describe", "u-1"], checkpoint.describe),
        (["c", "download", "u-1", "-o", "out", "-q"], checkpoint.download),
        (["c", "delete", "u-1,u-2", "--yes"], checkpoint.delete),
        (["c", "rm", "u-1,u-2", "--glob", "*", "--yes"], checkpoint.remove_files),
        (["c", "delete", "u-1"], checkpoint.delete),
        (["t", "download", "3", "--best"], trial.download),
        (["task"], task.list_tasks),
        (["task", "list", "--csv"], task.list_tasks),
        (["task", "logs", "3.7", "--tail", "5"], task.logs),
        (["version"], master.version),
        (["t", "download", "3", "--uuid", "u-1", "-o", "out"], trial.download),
        (["e", "wait", "1", "--interval", "0.5"], experiment.wait),
        (["e", "kill", "1"], experiment.action),
        (["e", "pause", "1"], experiment.action),
        (["e", "activate", "1"], experiment.action),
        (["e", "cancel", "1"], experiment.action),
        (["e", "archive", "1"], experiment.action),
        (["e", "unarchive", "1"], experiment.action),
        (["e", "delete", "1", "--yes"], experiment.delete),
        (["e", "logs", "1", "-f", "--tail", "5"], experiment.logs),
        (["trial", "describe", "3"], trial.describe),
        (["t", "describe", "3", "--json"], trial.describe),
        (["t", "logs", "3"], trial.logs),
        (["t", "kill", "3"], trial.kill),
        (["deploy", "local", "cluster-up"], deploy.cluster_up),
        (["deploy", "local", "cluster-down"], deploy.cluster_down),
    ],
)
def test_every_command_and_alias_reaches_its_handler(argv: list[str], func: object) -> None:
    assert parse(*argv).func is func


@pytest.mark.parametrize(
    "argv", [["agent", "list"], ["agent", "list", "--json"], ["slot", "list"], ["master", "info"]]
)
def test_cluster_commands_parse(argv: list[str]) -> None:
    assert callable(parse(*argv).func)


def test_create_flags_match_determined() -> None:
    args = parse(
        "e", "create", "const.yaml", "ctx", "-f", "--paused", "--config", "a.b=2",
        "--config", "name=x", "-i", "extra.py", "--include", "data", "--project_id", "7",
        "-t", "--local",
    )  # fmt: skip
    assert (args.config_file, args.context_dir) == ("const.yaml", "ctx")
    assert args.follow_first_trial and args.paused and args.test_mode and args.local
    assert [(o.keys, o.value) for o in args.config_overrides] == [(("a", "b"), 2), (("name",), "x")]
    assert args.include == ["extra.py", "data"]
    assert args.project_id == 7


def test_master_flag_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_MASTER", "elsewhere:1")
    assert parse("-m", "here:2", "e", "ls").master == "here:2"
    assert parse("--master", "here:3", "e", "ls").master == "here:3"
    assert parse("e", "ls").master is None  # the client falls back to DET_MASTER


def test_trial_log_filters_become_the_request() -> None:
    args = parse(
        "t", "logs", "9", "-f", "--tail", "20", "--rank-id", "0", "--rank-id", "2",
        "--level", "warning", "--search", "loss",
    )  # fmt: skip
    req = trial.logs_request(args.trial_id, args)
    assert (req.trial_id, req.follow, req.tail, req.head) == (9, True, 20, 0)
    assert list(req.rank_ids) == [0, 2]
    assert (req.min_level, req.search_text) == (v1.LogLevel.WARNING, "loss")


def test_determineds_other_log_filters_become_the_request() -> None:
    args = parse(
        "task", "logs", "3.9", "--agent-id", "a0", "--container-id", "c1", "--stdtype", "stderr",
        "--allocation-id", "3.9.1", "--timestamp-before", "2021-10-26T23:17:12Z",
        "--timestamp-after", "2021-10-26T23:17:12+01:00",
    )  # fmt: skip
    req = trial.logs_request(9, args)
    assert (list(req.agent_ids), list(req.container_ids)) == (["a0"], ["c1"])
    assert (list(req.stdtypes), list(req.allocation_ids)) == (["stderr"], ["3.9.1"])
    assert req.timestamp_before is not None and req.timestamp_after is not None
    assert req.timestamp_before.timestamp() == 1635290232.0
    assert req.timestamp_after.timestamp() == 1635290232.0 - 3600


def test_a_time_that_is_not_rfc3339_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("t", "logs", "9", "--timestamp-before", "yesterday")
    assert "RFC 3339" in capsys.readouterr().err


def test_deploy_defaults() -> None:
    args = parse("deploy", "local", "cluster-up")
    assert (args.master_port, args.agents, args.slots, args.runtime) == (8080, 1, None, "process")
    home = pathlib.Path("~/.local/share/pydet").expanduser().resolve()
    # The data directory comes from Determined's --cluster-name unless --data-dir says.
    assert args.data_dir is None and args.cluster_name == "determined"
    assert deploy.data_dir_of(args) == home / "local"
    named = parse("deploy", "local", "cluster-down", "--cluster-name", "lab")
    assert deploy.data_dir_of(named) == home / "local-lab"
    given = parse("deploy", "local", "master-up", "--cluster-name", "lab", "--data-dir", "/tmp/x")
    assert deploy.data_dir_of(given) == pathlib.Path("/tmp/x")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["e"],
        ["e", "describe"],
        ["e", "describe", "one"],
        ["t", "download", "1"],
        ["t", "download", "1", "--best", "--latest"],
        ["c", "download", "u-1", "--mode", "carrier-pigeon"],
        ["e", "create", "c.yaml", ".", "--config", "no-equals-sign"],
        ["e", "create", "c.yaml", ".", "--config", "a..b=1"],
        ["e", "frobnicate", "1"],
        ["t", "logs", "1", "--head", "1", "--tail", "1"],
        ["t", "logs", "1", "--level", "LOUD"],
        ["deploy", "local", "cluster-up", "--master-port", "0"],
        ["deploy", "local", "cluster-up", "--master-port", "70000"],
        ["deploy", "local", "cluster-up", "--slots", "0"],
        ["deploy", "local", "cluster-up", "--agents", "many"],
        ["nonsense"],
    ],
)
def test_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage: det" in capsys.readouterr().err


def test_following_a_paused_experiment_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["e", "create", "c.yaml", ".", "--paused", "-f"])
    assert exc.value.code == 2
    assert "--follow-first-trial cannot be used with --paused" in capsys.readouterr().err


def test_determineds_other_names_parse_as_theirs() -> None:
    unpause = parse("e", "unpause", "3")
    assert (unpause.func, unpause.action_name, unpause.experiment_id) == (
        experiment.action,
        "activate",
        3,
    )
    assert parse("job", "list", "-p", "gpu").resource_pool == "gpu"
