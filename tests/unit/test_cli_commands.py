"""Commands against an in-memory master (grpclib's ChannelFor: real gRPC, no sockets)."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpclib
import grpclib.const
import pytest
from grpclib.testing import ChannelFor

from determined.api.gen import v1
from determined.common import client, structs
from pydet.cli import auth
from pydet.cli.__main__ import main


class FakeMaster(v1.DeterminedBase):
    """Just enough of a master; `script` lists the states GetExperiment walks through."""

    def __init__(self) -> None:
        self.experiments: dict[int, v1.Experiment] = {}
        self.trials: list[v1.Trial] = []
        self.created: list[v1.CreateExperimentRequest] = []
        self.calls: list[str] = []
        self.script: list[v1.State] = []
        self.polls_before_trial = 2
        self.log_lines = ["first\n", "second\n"]
        self.fail_logs_after: int | None = None
        self.last_list: v1.GetExperimentsRequest | None = None

    def experiment(self, exp_id: int) -> v1.Experiment:
        if exp_id not in self.experiments:
            raise grpclib.GRPCError(
                grpclib.const.Status.NOT_FOUND, f"experiment {exp_id} not found"
            )
        return self.experiments[exp_id]

    async def create_experiment(
        self, message: v1.CreateExperimentRequest
    ) -> v1.CreateExperimentResponse:
        self.created.append(message)
        e = v1.Experiment(id=len(self.experiments) + 1, name="exp", state=v1.State.ACTIVE)
        self.experiments[e.id] = e
        return v1.CreateExperimentResponse(experiment=e, warning_messages=["resource pool is busy"])

    async def get_me(self, message: v1.GetMeRequest) -> v1.GetMeResponse:
        return v1.GetMeResponse(user=v1.User(id=1, username="ann"))

    async def get_experiments(self, message: v1.GetExperimentsRequest) -> v1.GetExperimentsResponse:
        self.last_list = message
        return v1.GetExperimentsResponse(experiments=list(self.experiments.values()))

    async def get_experiment(self, message: v1.GetExperimentRequest) -> v1.GetExperimentResponse:
        e = self.experiment(message.experiment_id)
        if self.script:
            e.state = self.script.pop(0)
        config = structs.struct({"name": "exp", "searcher": {"name": "single", "metric": "loss"}})
        return v1.GetExperimentResponse(experiment=e, config=config)

    async def get_experiment_trials(
        self, message: v1.GetExperimentTrialsRequest
    ) -> v1.GetExperimentTrialsResponse:
        self.experiment(message.experiment_id)
        if self.polls_before_trial > 0:
            self.polls_before_trial -= 1
            return v1.GetExperimentTrialsResponse()
        trials = [t for t in self.trials if t.experiment_id == message.experiment_id]
        return v1.GetExperimentTrialsResponse(trials=trials)

    async def trial_logs(self, message: v1.TrialLogsRequest) -> AsyncIterator[v1.TrialLogsResponse]:
        self.calls.append(f"logs {message.trial_id} follow={message.follow}")
        for i, line in enumerate(self.log_lines):
            if self.fail_logs_after == i:
                raise grpclib.GRPCError(grpclib.const.Status.UNAVAILABLE, "shutting down")
            log = v1.TaskLog(id=i, trial_id=message.trial_id, message=line, log=line)
            yield v1.TrialLogsResponse(logs=[log])

    async def kill_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        self.calls.append(f"kill {message.experiment_id}")
        return v1.ExperimentActionResponse(experiment=self.experiment(message.experiment_id))

    async def delete_experiment(
        self, message: v1.ExperimentActionRequest
    ) -> v1.ExperimentActionResponse:
        self.calls.append(f"delete {message.experiment_id}")
        return v1.ExperimentActionResponse()


class InMemorySession(client.Session):
    def __init__(self, channel: grpclib.client.Channel) -> None:
        super().__init__("in-memory:1")
        self._memory = channel

    @property
    def stub(self) -> v1.DeterminedStub:
        return v1.DeterminedStub(self._memory)


@pytest.fixture
def master(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMaster]:
    fake = FakeMaster()

    @contextlib.asynccontextmanager
    async def session(address: str | None = None, *, token: str | None = None) -> Any:
        async with ChannelFor([fake]) as channel:
            yield InMemorySession(channel)

    async def logged_in(session: client.Session) -> None:
        session.token = "test-token"

    monkeypatch.setattr(client, "session", session)
    # The fake master checks no credentials; the CLI's login is tested against a real one.
    monkeypatch.setattr(auth, "authenticate", logged_in)
    yield fake


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "train.py").write_text("print('hi')\n")
    (tmp_path / "const.yaml").write_text(
        "name: exp\nentrypoint: python3 train.py\n"
        "searcher: {name: single, metric: loss, max_length: 5}\n"
    )
    return tmp_path


def create_argv(project: Path, *extra: str) -> list[str]:
    return ["e", "create", str(project / "const.yaml"), str(project / "ctx"), *extra]


def test_create_submits_config_and_context(
    master: FakeMaster, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(create_argv(project, "--paused")) == 0
    out, err = capsys.readouterr()
    assert out == "Created experiment 1\n"
    assert err == "Warning: resource pool is busy\n"
    (request,) = master.created
    assert not request.activate
    assert request.config == (project / "const.yaml").read_text()
    with tarfile.open(fileobj=io.BytesIO(request.context), mode="r:gz") as tar:
        assert tar.getnames() == ["train.py"]


def test_follow_first_trial_prints_its_logs_and_exits_0_when_completed(
    master: FakeMaster, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    master.trials = [v1.Trial(id=12, experiment_id=1), v1.Trial(id=11, experiment_id=1)]
    master.script = [v1.State.ACTIVE, v1.State.ACTIVE, v1.State.COMPLETED]
    assert main(create_argv(project, "-f")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Created experiment 1"
    assert "Following the logs of trial 11" in out  # the first trial is the lowest id
    assert out[-3:] == [
        "[1970-01-01T00:00:00.000000Z] first",
        "[1970-01-01T00:00:00.000000Z] second",
        "Experiment 1 finished with state COMPLETED",
    ]
    assert master.calls == ["logs 11 follow=True"]


def test_follow_first_trial_exits_1_when_the_experiment_errors(
    master: FakeMaster, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    master.trials = [v1.Trial(id=1, experiment_id=1)]
    master.polls_before_trial = 0
    master.script = [v1.State.ERROR]
    assert main(create_argv(project, "--follow-first-trial")) == 1
    assert capsys.readouterr().out.endswith("Experiment 1 finished with state ERROR\n")


def test_wait_polls_until_terminal_and_exit_code_says_completed(
    master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    master.experiments[4] = v1.Experiment(id=4, state=v1.State.ACTIVE)
    master.script = [v1.State.ACTIVE, v1.State.STOPPING_COMPLETED, v1.State.COMPLETED]
    assert main(["e", "wait", "4", "--interval", "0.01"]) == 0
    assert capsys.readouterr().out == "Experiment 4 finished with state COMPLETED\n"
    master.script = [v1.State.STOPPING_CANCELED, v1.State.CANCELED]
    assert main(["e", "wait", "4", "--interval", "0.01"]) == 1
    assert capsys.readouterr().out == "Experiment 4 finished with state CANCELED\n"


def test_unknown_experiment_is_one_line_and_exit_1(
    master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["e", "describe", "99"]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", "Error: experiment 99 not found\n")


def test_list_shows_your_unarchived_experiments_unless_all_and_json_has_plain_states(
    master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    master.experiments[1] = v1.Experiment(id=1, name="a", state=v1.State.PAUSED, username="ann")
    assert main(["e", "ls", "--json"]) == 0
    assert master.last_list is not None and master.last_list.archived is False
    assert list(master.last_list.users) == ["ann"]
    listed = json.loads(capsys.readouterr().out)
    assert [(e["id"], e["state"]) for e in listed] == [(1, "PAUSED")]
    assert main(["e", "list", "-a"]) == 0
    assert master.last_list.archived is None and list(master.last_list.users) == []
    table = capsys.readouterr().out.splitlines()
    assert [c.strip() for c in table[0].split("|")][:3] == ["ID", "Owner", "Name"]
    assert [c.strip() for c in table[0].split("|")][-1] == "Archived"
    assert [c.strip() for c in table[2].split("|")][:5] == ["1", "ann", "a", "", "PAUSED"]


def test_config_prints_the_filled_config_as_yaml(
    master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    master.experiments[2] = v1.Experiment(id=2)
    assert main(["e", "config", "2"]) == 0
    assert capsys.readouterr().out == "name: exp\nsearcher:\n  name: single\n  metric: loss\n"


def test_kill_confirms(master: FakeMaster, capsys: pytest.CaptureFixture[str]) -> None:
    master.experiments[3] = v1.Experiment(id=3)
    assert main(["e", "kill", "3"]) == 0
    assert capsys.readouterr().out == "Killed experiment 3\n"
    assert master.calls == ["kill 3"]


def test_delete_without_a_terminal_needs_yes(
    master: FakeMaster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["e", "delete", "3"]) == 1
    assert "pass --yes" in capsys.readouterr().err
    assert master.calls == []
    assert main(["e", "delete", "3", "--yes"]) == 0
    assert master.calls == ["delete 3"]


def test_experiment_logs_without_trials_is_an_error(
    master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    master.experiments[1] = v1.Experiment(id=1)
    master.polls_before_trial = 0
    assert main(["e", "logs", "1"]) == 1
    assert capsys.readouterr().err == "Error: experiment 1 has no trials yet\n"


def test_master_going_away_mid_stream_keeps_printed_lines_and_exits_1(
    master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    master.fail_logs_after = 1
    assert main(["t", "logs", "5", "-f"]) == 1
    out, err = capsys.readouterr()
    assert out == "[1970-01-01T00:00:00.000000Z] first\n"
    assert err.startswith("Error: the master at in-memory:1 is unavailable")
    assert master.calls == ["logs 5 follow=True"]


def test_describe_json_is_a_list_of_experiment_entries_as_in_determined(
    master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    master.experiments[3] = v1.Experiment(id=3, name="exp", state=v1.State.RUNNING)
    master.polls_before_trial = 0
    master.trials = [v1.Trial(id=8, experiment_id=3, state=v1.State.RUNNING)]
    assert main(["e", "describe", "3", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["experiment"]["id"] == 3
    assert entry["experiment"]["state"] == "RUNNING"
    assert entry["experiment"]["config"]["searcher"]["metric"] == "loss"
    assert [t["id"] for t in entry["trials"]] == [8]


def test_describe_takes_comma_separated_ids(
    master: FakeMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    master.experiments[3] = v1.Experiment(id=3, name="three", state=v1.State.COMPLETED)
    master.experiments[4] = v1.Experiment(id=4, name="four", state=v1.State.QUEUED)
    master.polls_before_trial = 0
    assert main(["e", "describe", "3,4", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [(e["experiment"]["id"], e["experiment"]["state"]) for e in entries] == [
        (3, "COMPLETED"),
        (4, "QUEUED"),
    ]
    assert main(["e", "describe", "3,4"]) == 0
    out = capsys.readouterr().out
    assert "three" in out and "four" in out
    assert main(["e", "describe", "3,99"]) == 1
    assert "experiment 99 not found" in capsys.readouterr().err
