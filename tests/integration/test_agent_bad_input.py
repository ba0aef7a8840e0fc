"""An agent set up wrong is told why, and so is the person reading `det agent list`."""

from __future__ import annotations

import pathlib

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


def test_a_master_name_that_resolves_to_nothing_is_said_by_the_agent(cluster: Cluster) -> None:
    log = cluster.spawn_agent("lost", "--master", "no-such-host.invalid:8080")
    log_says(log, "cannot reach the master at no-such-host.invalid:8080")
    assert "Traceback" not in log.read_text()
