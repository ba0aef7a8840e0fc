"""Fixtures for the Slurm suite: a real single-machine Slurm cluster on loopback.

The suite runs only when ``SLURM_TESTS`` is set (CI sets it after
``scripts/slurm/install.sh``); otherwise every test is skipped with that reason, and the
default selection (``-m "not ... and not slurm"``) never collects it anyway. The cluster is
started once per session by ``scripts/slurm/start.sh`` in a temporary directory and stopped
by ``scripts/slurm/stop.sh`` at the end.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.cluster import ROOT, wait_until

SCRIPTS = ROOT / "scripts" / "slurm"
# The node's artificial CPU slots (PYDET_SLURM_CPUS of start.sh).
CPUS = 4


@dataclass
class SlurmCluster:
    """A running cluster: its directory (logs, jobcomp file) and the env its clients need."""

    dir: pathlib.Path
    env: dict[str, str]

    def run(
        self, *args: str, cwd: pathlib.Path | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            list(args),
            env=self.env,
            cwd=cwd or self.dir,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def sbatch(self, *args: str, cwd: pathlib.Path | None = None) -> int:
        """Submit a batch job; its id."""
        out = self.run("sbatch", "--parsable", *args, cwd=cwd).stdout.strip()
        return int(out.split(";")[0])

    def job(self, job_id: int) -> dict[str, str]:
        """``scontrol show job`` as a dict (the job stays known for MinJobAge after it ends)."""
        out = self.run("scontrol", "show", "job", "-o", str(job_id)).stdout
        fields: dict[str, str] = {}
        for word in out.split():
            key, sep, value = word.partition("=")
            if sep:
                fields[key] = value
        return fields

    def state(self, job_id: int) -> tuple[str, str]:
        """The job's state and reason, from ``squeue -t all`` (ended jobs included)."""
        out = self.run("squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T|%r").stdout
        state, _, reason = out.strip().partition("|")
        return state, reason

    def wait_state(self, job_id: int, *states: str, timeout: float = 60) -> str:
        def reached() -> str | None:
            state = self.state(job_id)[0]
            return state if state in states else None

        result: str = wait_until(reached, timeout, f"job {job_id} to be {'/'.join(states)}", 0.3)
        return result

    @contextlib.contextmanager
    def controller_down(self) -> Iterator[None]:
        """slurmctld stopped (slurmd and munged go on) for the block, then started again
        from its saved state, as start.sh starts it but without ``-i``, so the jobs it knew
        are kept; the block returns once it answers, so later tests find it healthy."""
        pidfile = self.dir / "run" / "slurmctld.pid"
        pid = int(pidfile.read_text())
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not _alive(pid), 30, "slurmctld to stop", 0.2)
        try:
            yield
        finally:
            with (self.dir / "log" / "slurmctld.out").open("a") as out:
                subprocess.Popen(
                    ["slurmctld", "-D", "-f", self.env["SLURM_CONF"]],
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
            wait_until(
                lambda: self.run("sinfo", "-h", check=False).returncode == 0,
                60,
                "slurmctld to answer again",
                0.5,
            )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours that has not been reaped yet is gone too.
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the test (``item.rep_call``), for fixtures that print
    what their processes logged when the test failed."""
    outcome = yield
    setattr(item, f"rep_{call.when}", outcome.get_result())  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    if not os.environ.get("SLURM_TESTS"):
        pytest.skip("the Slurm suite runs only with SLURM_TESTS=1 (after scripts/slurm/install.sh)")
    if shutil.which("sbatch") is None:
        pytest.fail("SLURM_TESTS is set but Slurm is not installed: run scripts/slurm/install.sh")
    root = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "PYDET_SLURM_CPUS": str(CPUS)}
    proc = subprocess.run(
        [str(SCRIPTS / "start.sh"), str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if proc.returncode != 0:
        subprocess.run([str(SCRIPTS / "stop.sh"), str(root)], env=env, check=False)
        pytest.fail(f"scripts/slurm/start.sh failed:\n{proc.stderr[-3000:]}")
    env["SLURM_CONF"] = str(root / "slurm.conf")
    try:
        yield SlurmCluster(root, env)
    finally:
        subprocess.run([str(SCRIPTS / "stop.sh"), str(root)], env=env, timeout=60, check=False)
