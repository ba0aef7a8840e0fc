"""A master killed at any commit point of a search restarts into the same search.

Every transition of a trial (its rows, its allocation's rows, the searcher's state, the
checkpoints retention marks) is one transaction, so there is no point at which a master
can die leaving a state the restarted master cannot continue from. The test kills it at
each point: master/store/db.py's test-only hook (``PYDET_TEST_EXIT_AFTER_COMMITS=N``) makes it
exit right after its Nth commit; a master started again on the same store without the hook
finishes the search. Seeded random SIGKILLs cover moments between commits.

The search is deterministic: adaptive ASHA, one trial at a time, each trial's loss a
function of its hyperparameter and length. An uninterrupted run is the reference; every
interrupted run must end with exactly its trials (no trial twice, none lost), lengths and
decisions, and with every metric a trial had reported and seen acknowledged.
"""

from __future__ import annotations

import json
import pathlib
import random
import re
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pydet.master.store.db import EXIT_AFTER_COMMITS_ENV
from tests.cluster import Cluster

TERMINAL = ("COMPLETED", "ERROR", "CANCELED")
# Seconds one search may take, interruptions included.
SEARCH_TIMEOUT = 150.0

SCRIPT = """
import json
import pathlib
import time

import determined as det

info = det.get_cluster_info()
x = info.trial.hparams["x"]
acks = pathlib.Path({acks!r})


def loss(steps):
    return round((x - 0.3) ** 2 + 1.0 / steps, 6)


def acknowledged(group, steps):
    with acks.open("a") as f:
        f.write(json.dumps([info.trial.trial_id, group, steps, loss(steps)]) + "\\n")


with det.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = int((path / "step").read_text())
    for op in core.searcher.operations():
        while step < op.length:
            step += 1
            time.sleep(0.2)
            core.train.report_training_metrics(steps_completed=step, metrics={{"loss": loss(step)}})
            # Storing a checkpoint first ships every metric reported before it.
            with core.checkpoint.store_path({{"steps_completed": step}}) as (path, _):
                (path / "step").write_text(str(step))
            acknowledged("training", step)
        core.train.report_validation_metrics(steps_completed=step, metrics={{"loss": loss(step)}})
        op.report_completed(loss(step))
        acknowledged("validation", step)
"""

CONFIG = """
name: {name}
entrypoint: python3 train.py
hyperparameters:
  x: {{type: double, minval: 0, maxval: 1}}
searcher:
{searcher}
checkpoint_storage:
  type: shared_fs
  host_path: {storage}
  save_trial_best: 1
  save_trial_latest: 1
max_restarts: 5
reproducibility: {{experiment_seed: 11}}
"""

ASHA = """\
  name: adaptive_asha
  metric: loss
  max_length: 3
  max_trials: 3
  divisor: 3
  max_rungs: 2
  mode: aggressive
  max_concurrent_trials: 1"""

# A random search keeps what it knows of each running trial on the trial's row
# (search/base.py, trial_records): its walk checks those rows survive every commit point.
RANDOM = """\
  name: random
  metric: loss
  max_length: 2
  max_trials: 3
  max_concurrent_trials: 1"""


class HookedCluster(Cluster):
    """A cluster whose master may be started with the exit hook, and whose start returns
    when the master answers or has already exited."""

    exit_after = 0

    @property
    def env(self) -> dict[str, str]:
        # Set only while start_hooked starts a master: agents and `det` never see it.
        env = dict(super().env)
        if self.exit_after:
            env[EXIT_AFTER_COMMITS_ENV] = str(self.exit_after)
        return env

    def healthy(self) -> bool:
        if self.master is not None and self.master.poll() is not None:
            return True  # it died starting: nothing to wait for
        return super().healthy()

    def start_hooked(self, exit_after: int) -> None:
        self.exit_after = exit_after
        try:
            self.start_master()
        finally:
            self.exit_after = 0

    def master_died(self) -> bool:
        return self.master is not None and self.master.poll() is not None

    def reap_master(self) -> int | None:
        """Stop the master (if it still runs); its exit code. A master that does not stop
        cleanly (status 0 after SIGTERM; the hook's 137 if its last commit came while it
        stopped) fails the test with what it logged since the signal."""
        if self.master is None:
            return None
        proc = self.master
        log = self.root / "master.log"
        offset = log.stat().st_size if log.exists() else 0
        signalled = proc.poll() is None
        if signalled:
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        self.master = None
        if signalled and code not in (0, 137):
            # A slow stop logs the tasks it waits on, then the threads' stacks.
            with log.open("rb") as f:
                f.seek(offset)
                since = f.read().decode(errors="replace")
            raise AssertionError(
                f"the master did not stop cleanly (status {code}); it logged:\n{since[-20000:]}"
            )
        return code


@dataclass(frozen=True)
class Outcome:
    """What a search decided, in terms that do not depend on ids or timing."""

    state: str
    # request id -> (x, searcher length, state, phase, steps completed, best validation)
    trials: dict[str, tuple[float, int, str, str, int, float | None]]
    # request id -> the distinct (group, steps, loss) it reported
    metrics: dict[str, set[tuple[str, int, float]]]
    # request id -> steps of its checkpoints kept by retention
    kept: dict[str, set[int]]


@dataclass(frozen=True)
class Run:
    experiment_id: int
    # Commits the first master made: all of them if it was not stopped.
    commits: int
    # Seconds from the search's creation until the first master ended it or died.
    seconds: float
    interrupted: bool


@dataclass
class Walk:
    cluster: HookedCluster
    work: pathlib.Path
    searcher: str = ASHA
    # Names its searches prefix-1, prefix-2, ...: walks sharing a cluster use their own.
    prefix: str = "walk"
    runs: int = 0

    def context(self) -> pathlib.Path:
        ctx = self.work / "ctx"
        if not ctx.exists():
            ctx.mkdir()
            (ctx / "train.py").write_text(SCRIPT.format(acks=str(self.work / "acks.jsonl")))
        return ctx

    def config(self, name: str) -> pathlib.Path:
        path = self.work / f"{name}.yaml"
        storage = self.work / "checkpoints"
        text = textwrap.dedent(CONFIG).format(name=name, storage=storage, searcher=self.searcher)
        path.write_text(text)
        return path

    def find(self, name: str) -> int | None:
        try:
            found = self.cluster.get(f"/api/v1/experiments?name={name}")["experiments"]
        except OSError:
            return None
        ids = [int(e["id"]) for e in found if e["name"] == name]
        assert len(ids) <= 1, f"experiment {name} was created {len(ids)} times"
        return ids[0] if ids else None

    def create(self, name: str) -> int | None:
        """Create the search; None if the master died before answering."""
        proc = self.cluster.det(
            "experiment", "create", str(self.config(name)), str(self.context()), check=False
        )
        match = re.search(r"Created experiment (\d+)", proc.stdout)
        return int(match.group(1)) if match else None

    def state(self, exp_id: int) -> str | None:
        try:
            return self.cluster.state(exp_id)
        except OSError:
            return None

    def run(self, *, exit_after: int = 0, kill_after: float | None = None) -> Run:
        """One search: a master started with the hook (or killed ``kill_after`` seconds into
        the search), then, if it died, one without, until the search ends."""
        c = self.cluster
        self.runs += 1
        name = f"{self.prefix}-{self.runs}"
        log = c.root / "master.log"
        offset = log.stat().st_size if log.exists() else 0
        c.start_hooked(exit_after)
        exp_id = None if c.master_died() else self.create(name)
        started = time.monotonic()
        deadline = started + SEARCH_TIMEOUT
        if kill_after is not None and not c.master_died():
            time.sleep(kill_after)
            assert c.master is not None
            c.master.send_signal(signal.SIGKILL)
        while not c.master_died():
            assert time.monotonic() < deadline, f"search {name} did not end"
            if exp_id is not None and self.state(exp_id) in TERMINAL:
                break
            time.sleep(0.2)
        took = time.monotonic() - started
        died = c.master_died()
        commits = _commits(log, offset)
        if died:
            assert c.reap_master() in (137, -signal.SIGKILL)
            c.start_master()
            exp_id = self.find(name)
            if exp_id is None:
                exp_id = self.create(name)
                assert exp_id is not None, "the master refused the search after its restart"
        assert exp_id is not None
        state = c.wait_state(exp_id, *TERMINAL, timeout=max(1.0, deadline - time.monotonic()))
        assert state == "COMPLETED", (
            f"{name} ended {state}: {c.get(f'/api/v1/experiments/{exp_id}/trials')}"
        )
        c.reap_master()
        return Run(exp_id, commits, took, died)

    def outcome(self, exp_id: int) -> Outcome:
        sql = self.cluster.sql
        (state,) = sql("SELECT state FROM experiments WHERE id = ?", (exp_id,))
        rows = sql(
            "SELECT id, request_id, hparams, searcher_length, state, phase, steps_completed,"
            " best_validation FROM trials WHERE experiment_id = ? ORDER BY id",
            (exp_id,),
        )
        rids = [str(r[1]) for r in rows]
        assert len(rids) == len(set(rids)), f"a trial ran twice: {rids}"
        by_id = {int(r[0]): str(r[1]) for r in rows}
        trials = {
            str(r[1]): (
                float(json.loads(r[2])["x"]),
                int(r[3]),
                str(r[4]),
                str(r[5]),
                int(r[6]),
                None if r[7] is None else round(float(r[7]), 6),
            )
            for r in rows
        }
        metrics: dict[str, set[tuple[str, int, float]]] = {rid: set() for rid in rids}
        for trial_id, grp, steps, text in sql(
            "SELECT m.trial_id, m.grp, m.steps_completed, m.metrics FROM metrics m"
            " JOIN trials t ON t.id = m.trial_id WHERE t.experiment_id = ?",
            (exp_id,),
        ):
            metrics[by_id[trial_id]].add((grp, steps, json.loads(text)["loss"]))
        kept: dict[str, set[int]] = {rid: set() for rid in rids}
        storage = self.work / "checkpoints"
        for uuid, trial_id, steps, ckpt_state in sql(
            "SELECT uuid, trial_id, steps_completed, state FROM checkpoints"
            " WHERE experiment_id = ?",
            (exp_id,),
        ):
            if ckpt_state != "DELETED":
                # A checkpoint on record has its files: retention marks first and
                # removes files only after the mark has committed.
                assert (storage / uuid / "step").exists(), f"checkpoint {uuid} lost its files"
                kept[by_id[trial_id]].add(int(steps))
        # Every metric a trial saw acknowledged is in the store.
        acks = self.work / "acks.jsonl"
        for line in acks.read_text().splitlines() if acks.exists() else []:
            trial_id, grp, steps, loss = json.loads(line)
            if trial_id in by_id:
                assert (grp, steps, loss) in metrics[by_id[trial_id]], (
                    f"trial {trial_id}: acknowledged {grp} metric at step {steps} is missing"
                )
        return Outcome(str(state[0]), trials, metrics, kept)


def _commits(log: pathlib.Path, offset: int) -> int:
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    found = re.findall(r"test hook: commit (\d+) of", text)
    return int(found[-1]) if found else 0


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    root = tmp_path_factory.mktemp("crash")
    c = HookedCluster(root)
    try:
        c.start_master()
        c.start_agent("agent-0", slots=1)
        c.reap_master()
        yield Walk(c, root)
    except BaseException:
        print(c.dump_logs())
        raise
    finally:
        c.close()


@pytest.fixture(scope="module")
def reference(walk: Walk) -> tuple[Outcome, Run]:
    """The uninterrupted search, and its run (how many commits, how long)."""
    outcome, run = uninterrupted(walk)
    assert {t[1] for t in outcome.trials.values()} == {1, 3}, outcome.trials
    assert all(t[2:4] == ("COMPLETED", "COMPLETED") for t in outcome.trials.values())
    assert run.commits > 10
    return outcome, run


def uninterrupted(walk: Walk) -> tuple[Outcome, Run]:
    """A search run to its end, of three trials."""
    run = walk.run(exit_after=10**9)
    assert not run.interrupted
    outcome = walk.outcome(run.experiment_id)
    assert outcome.state == "COMPLETED"
    assert len(outcome.trials) == 3
    return outcome, run


def check_same(walk: Walk, reference: Outcome, exp_id: int) -> None:
    got = walk.outcome(exp_id)
    assert got.state == reference.state
    assert sorted(got.trials) == sorted(reference.trials), "trials lost or added"
    assert got.trials == reference.trials
    assert got.metrics == reference.metrics
    assert got.kept == reference.kept


def points(commits: int, count: int) -> list[int]:
    """``count`` commit points spread over a search of ``commits`` commits."""
    return sorted({max(1, round(commits * (i + 0.5) / count)) for i in range(count)})


def kill_at_points(walk: Walk, reference: tuple[Outcome, Run], count: int) -> None:
    """Searches whose masters exit at ``count`` commit points each end like the reference."""
    outcome, first = reference
    interrupted = []
    for n in points(first.commits, count):
        run = walk.run(exit_after=n)
        interrupted.append(run.interrupted)
        check_same(walk, outcome, run.experiment_id)
    # How many commits a search takes varies a little (log lines arrive in batches): the
    # last point may lie past the end of a run.
    assert all(interrupted[:-1]), interrupted


@pytest.fixture(scope="module")
def random_walk(walk: Walk) -> Walk:
    """A random search's walk, on the same cluster."""
    return Walk(walk.cluster, walk.work, searcher=RANDOM, prefix="random")


@pytest.fixture(scope="module")
def random_reference(random_walk: Walk) -> tuple[Outcome, Run]:
    outcome, run = uninterrupted(random_walk)
    assert all(t[1:5] == (2, "COMPLETED", "COMPLETED", 2) for t in outcome.trials.values())
    return outcome, run


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("walk_name", "reference_name", "count"),
    [("walk", "reference", 4), ("random_walk", "random_reference", 6)],
    ids=["asha", "random"],
)
def test_a_master_killed_at_a_few_commit_points_finishes_the_same_search(
    request: pytest.FixtureRequest, walk_name: str, reference_name: str, count: int
) -> None:
    kill_at_points(
        request.getfixturevalue(walk_name), request.getfixturevalue(reference_name), count
    )


@pytest.mark.timeout(600)
def test_a_master_killed_at_random_moments_finishes_the_same_search(
    walk: Walk, reference: tuple[Outcome, Run]
) -> None:
    outcome, first = reference
    rng = random.Random(20240501)
    for _ in range(2):
        run = walk.run(kill_after=rng.uniform(0.05, 0.95) * first.seconds)
        check_same(walk, outcome, run.experiment_id)


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_a_master_killed_at_every_commit_point_finishes_the_same_search(
    walk: Walk, reference: tuple[Outcome, Run]
) -> None:
    outcome, first = reference
    n = 1
    while True:
        run = walk.run(exit_after=n)
        check_same(walk, outcome, run.experiment_id)
        if not run.interrupted:
            break  # the search ended before its nth commit: every point was visited
        n += 1
    assert n > first.commits // 2
    rng = random.Random(7)
    for _ in range(8):
        run = walk.run(kill_after=rng.uniform(0.05, 0.95) * first.seconds)
        check_same(walk, outcome, run.experiment_id)
