"""An agent set up wrong is told why, and so is the person reading `det agent list`."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

import pytest

from tests.cluster import EXAMPLES, Cluster, wait_until


def log_says(log: pathlib.Path, text: str, timeout: float = 30) -> None:
    wait_until(
        lambda: log.exists() and text in log.read_text(errors="replace"),
        timeout,
        f"{log.name} to say {text!r}",
        interval=0.2,
    )


def test_a_second_agent_with_a_connected_id_is_refused_and_the_first_stays(
    cluster: Cluster,
) -> None:
    log = cluster.spawn_agent("agent-0", name="impostor")
    log_says(log, "agent 'agent-0' is already connected from 127.0.0.1")
    log_says(log, "give each agent its own --agent-id")
    (agent,) = cluster.agents_json()
    assert agent["id"] == "agent-0" and agent["connected"]
    master_log = (cluster.root / "master.log").read_text()
    assert "reconnected; dropping its previous connection" not in master_log
    # The first agent still runs work.
    minimal = EXAMPLES / "minimal"
    exp_id = cluster.create(minimal / "const.yaml", minimal)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", timeout=180) == "COMPLETED"


def test_a_master_name_that_resolves_to_nothing_is_said_by_the_agent_once(
    cluster: Cluster,
) -> None:
    log = cluster.spawn_agent("lost", "--master", "no-such-host.invalid:8080")
    log_says(log, "cannot resolve the master's name no-such-host.invalid")
    # It retries (names come back: DNS at boot), several times in these 3 s, saying it once.
    time.sleep(3)
    text = log.read_text()
    (line,) = [x for x in text.splitlines() if "WARNING" in x or "ERROR" in x]
    assert "check --master (or DET_MASTER)" in line
    assert "Traceback" not in text


@pytest.mark.parametrize("token", ["missing", "wrong"])
def test_an_agent_without_the_token_exits_with_one_line_saying_why(
    cluster: Cluster, tmp_path: pathlib.Path, token: str
) -> None:
    token_file = tmp_path / "agent-token"
    if token == "wrong":
        token_file.write_text("not-the-agent-token\n")
    argv = ["--master", cluster.address, "--agent-id", "tokenless", "--token-file"]
    proc = subprocess.run(
        [sys.executable, "-m", "pydet.agent", *argv, str(token_file)],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    (line,) = [x for x in proc.stderr.splitlines() if "det-agent:" in x or "ERROR" in x]
    expected = {
        "missing": f"det-agent: token_file: cannot read {token_file}: No such file",
        "wrong": f"det-agent: the master at {cluster.address} refused this agent: missing or "
        "wrong agent token: start det-agent with --token-file",
    }[token]
    assert line.startswith(expected), proc.stderr
    assert proc.returncode == {"missing": 2, "wrong": 1}[token]
    assert "Traceback" not in proc.stderr
