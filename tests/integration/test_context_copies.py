"""An agent keeps the contexts its trials downloaded: an experiment's later trials on it
unpack the agent's copy, and a copy that is not the context the master names is never run."""

from __future__ import annotations

import pathlib
import textwrap

from tests.cluster import Cluster

SCRIPT = """
import determined as det

with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        core_context.train.report_validation_metrics(op.length, {"loss": 1.0})
        op.report_completed(1.0)
print("trained from the true context")
"""

CONFIG = """
name: copies
entrypoint: python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
searcher:
  name: random
  metric: loss
  max_trials: 3
  max_concurrent_trials: 1
  max_length: 1
max_restarts: 0
"""


def run(cluster: Cluster, tmp_path: pathlib.Path) -> tuple[int, list[str]]:
    """An experiment of three trials, one after another, on the cluster's one agent; its id
    and how each trial's launcher got the context, in trial order."""
    ctx, cfg = tmp_path / "ctx", tmp_path / "config.yaml"
    if not ctx.exists():  # made once: a second experiment packs the very same files
        ctx.mkdir()
        (ctx / "train.py").write_text(textwrap.dedent(SCRIPT))
        cfg.write_text(textwrap.dedent(CONFIG))
    exp_id = cluster.create(cfg, ctx)
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR", "CANCELED") == "COMPLETED"
    sources = []
    for trial in sorted(cluster.trials(exp_id), key=lambda t: t["id"]):
        logs = cluster.logs(trial["id"])
        assert "trained from the true context" in logs
        line = next(ln for ln in logs.splitlines() if "unpacked the context" in ln)
        sources.append("copy" if "the agent's copy" in line else "download")
    return exp_id, sources


def test_only_an_experiments_first_trial_on_an_agent_downloads_its_context(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    _, sources = run(cluster, tmp_path)
    assert sources == ["download", "copy", "copy"]
    copies = list((cluster.root / "agent-0" / "contexts").iterdir())
    assert len(copies) == 1


def test_a_copy_that_is_not_the_named_context_is_downloaded_again(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    first, _ = run(cluster, tmp_path)
    [copy] = (cluster.root / "agent-0" / "contexts").iterdir()
    copy.write_bytes(b"planted by another task of the agent")
    second, sources = run(cluster, tmp_path)
    # The same directory packs to the same bytes: the copy was the one the master named.
    [a], [b] = (
        cluster.sql("SELECT data FROM contexts WHERE experiment_id = ?", (e,))
        for e in (first, second)
    )
    assert a == b
    assert sources == ["download", "copy", "copy"]
