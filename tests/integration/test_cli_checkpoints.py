"""`det checkpoint`, `det trial download`, `det experiment download` and `describe --json`
against a real master and agent, on an experiment created without a context directory."""

from __future__ import annotations

import csv
import io
import json
import pathlib
from collections.abc import Iterator

import pytest

from tests.cluster import Cluster, cluster_fixture

# Two checkpoints: the first is the best (x is smaller), the second the latest.
SCRIPT = """
from determined import core
with core.init() as ctx:
    for step in (1, 2):
        ctx.train.report_validation_metrics(step, {"x": float(step)})
        with ctx.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
            (path / "w").write_text(str(step))
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("cluster"))


@pytest.fixture(scope="module")
def experiment(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> int:
    cfg = tmp_path_factory.mktemp("cfg") / "config.yaml"
    cfg.write_text(
        json.dumps(
            {
                "entrypoint": ["python3", "-c", SCRIPT],
                "searcher": {"name": "single", "metric": "x", "max_length": 2},
            }
        )
    )
    # No context directory: the code is in the config, as it could be in an image.
    out = cluster.det("experiment", "create", str(cfg)).stdout
    exp_id = int(out.split("Created experiment ")[1].split()[0])
    assert cluster.wait_state(exp_id, "COMPLETED", "ERROR") == "COMPLETED"
    return exp_id


def checkpoints(cluster: Cluster, exp_id: int) -> list[dict[str, object]]:
    return list(json.loads(cluster.det("checkpoint", "list", str(exp_id), "--json").stdout))


def uuid_at(cluster: Cluster, exp_id: int, step: int) -> str:
    (found,) = [c for c in checkpoints(cluster, exp_id) if c["steps_completed"] == step]
    return str(found["uuid"])


def test_describe_json_has_determineds_shape(cluster: Cluster, experiment: int) -> None:
    out = json.loads(cluster.det("experiment", "describe", str(experiment), "--json").stdout)
    assert isinstance(out, list) and len(out) == 1
    assert out[0]["experiment"]["id"] == experiment
    assert out[0]["experiment"]["state"] == "COMPLETED"


def test_checkpoint_list_in_table_csv_and_best(cluster: Cluster, experiment: int) -> None:
    first, second = uuid_at(cluster, experiment, 1), uuid_at(cluster, experiment, 2)
    table = cluster.det("checkpoint", "list", str(experiment)).stdout
    assert first in table and second in table and "Validation Metric" in table
    text = cluster.det("checkpoint", "list", str(experiment), "--csv").stdout
    header, *rows = list(csv.reader(io.StringIO(text)))
    assert header == [
        "Trial ID", "# of Batches", "State", "Validation Metric", "UUID", "Resources", "Size"
    ]  # fmt: skip
    assert [r[4] for r in rows] == [first, second]
    assert rows[0][5].splitlines() == ["metadata.json", "w"]
    best = cluster.det("e", "lc", str(experiment), "--best", "1", "--json").stdout
    assert [c["uuid"] for c in json.loads(best)] == [first]


def test_checkpoint_describe_and_download(
    cluster: Cluster, experiment: int, tmp_path: pathlib.Path
) -> None:
    first = uuid_at(cluster, experiment, 1)
    described = cluster.det("checkpoint", "describe", first).stdout
    assert first in described and "Steps Completed" in described
    out = cluster.det("checkpoint", "download", first, "-o", str(tmp_path / "a")).stdout
    assert "Local checkpoint path:" in out
    assert (tmp_path / "a" / "w").read_text() == "1"
    assert json.loads((tmp_path / "a" / "metadata.json").read_text())["steps_completed"] == 1
    quiet = cluster.det("c", "download", first, "-o", str(tmp_path / "b"), "-q").stdout
    assert quiet.strip() == str(tmp_path / "b")


def test_trial_download_best_and_latest(
    cluster: Cluster, experiment: int, tmp_path: pathlib.Path
) -> None:
    (trial,) = cluster.trials(experiment)
    tid = str(trial["id"])
    cluster.det("trial", "download", tid, "--best", "-o", str(tmp_path / "best"))
    cluster.det("trial", "download", tid, "--latest", "-o", str(tmp_path / "latest"))
    assert (tmp_path / "best" / "w").read_text() == "1"
    assert (tmp_path / "latest" / "w").read_text() == "2"
    # Ranked by x with larger better, the second checkpoint wins.
    out = tmp_path / "by-x"
    cluster.det("t", "download", tid, "--best", "--sort-by", "x", "--smaller-is-better", "false",
                "-o", str(out))  # fmt: skip
    assert (out / "w").read_text() == "2"


def test_trial_describe_json_and_metrics_summary(cluster: Cluster, experiment: int) -> None:
    (trial,) = cluster.trials(experiment)
    out = json.loads(cluster.det("trial", "describe", str(trial["id"]), "--json").stdout)
    assert out["trial"]["id"] == trial["id"]
    assert [w["steps_completed"] for w in out["workloads"] if w["group"] == "validation"] == [1, 2]
    text = cluster.det("trial", "describe", str(trial["id"]), "--metrics-summary").stdout
    summary = json.loads(text.split("Summary Metrics:")[1])
    assert summary["validation_metrics"]["x"]["min"] == 1.0
    logs = cluster.det("trial", "logs", str(trial["id"]), "--json").stdout.splitlines()
    assert logs and all(json.loads(line)["trial_id"] == trial["id"] for line in logs)


def test_experiment_download_puts_the_top_n_under_their_uuids(
    cluster: Cluster, experiment: int, tmp_path: pathlib.Path
) -> None:
    cluster.det("e", "download", str(experiment), "--top-n", "2", "-o", str(tmp_path), "-q")
    for step in (1, 2):
        assert (tmp_path / uuid_at(cluster, experiment, step) / "w").read_text() == str(step)


def test_list_commands_print_csv_and_pages(cluster: Cluster, experiment: int) -> None:
    lines = cluster.det("experiment", "list", "-a", "--csv").stdout.splitlines()
    assert lines[0].startswith("ID,Owner,Name,Parent ID,State")
    assert any(line.startswith(f"{experiment},") for line in lines)
    cluster.det("experiment", "archive", str(experiment))
    assert str(experiment) not in cluster.det("experiment", "list", "--csv").stdout
    assert f"{experiment}," in cluster.det("experiment", "list", "--all", "--csv").stdout
    cluster.det("experiment", "unarchive", str(experiment))
    one = json.loads(cluster.det("e", "list", "--json", "--pages", "1", "--limit", "1").stdout)
    assert len(one) == 1
    (trial,) = cluster.trials(experiment)
    described = cluster.det("trial", "describe", str(trial["id"]), "--csv").stdout.splitlines()
    assert described[0].startswith("Trial ID,Experiment ID,State") and len(described) == 2
    agents = cluster.det("agent", "list", "--csv").stdout.splitlines()
    assert len(agents) == 2 and agents[1].startswith("agent-0,")
    assert len(cluster.det("slot", "list", "--csv").stdout.splitlines()) == 2


def test_unknown_and_deleted_checkpoints_are_clear_errors(
    cluster: Cluster, experiment: int, tmp_path: pathlib.Path
) -> None:
    proc = cluster.det("checkpoint", "describe", "no-such-uuid", check=False)
    assert proc.returncode == 1 and "no-such-uuid" in proc.stderr
    assert "Traceback" not in proc.stderr
    second = uuid_at(cluster, experiment, 2)
    cluster.det("checkpoint", "delete", second, "--yes")
    proc = cluster.det("c", "download", second, "-o", str(tmp_path / "gone"), check=False)
    assert proc.returncode == 1 and "deleted" in proc.stderr, proc.stderr


def test_checkpoint_rm_removes_the_files_its_globs_match(cluster: Cluster, experiment: int) -> None:
    first = uuid_at(cluster, experiment, 1)
    refreshed = cluster.det("checkpoint", "rm", first).stdout  # no glob: nothing is removed
    assert f"Refreshed the files of checkpoints {first}" in refreshed
    assert json.loads(cluster.det("c", "describe", first, "--json").stdout)["state"] == "COMPLETED"
    cluster.det("checkpoint", "rm", first, "--glob", "w", "--yes")
    described = json.loads(cluster.det("c", "describe", first, "--json").stdout)
    assert described["state"] == "PARTIALLY_DELETED" and "w" not in described["resources"]
    cluster.det("checkpoint", "rm", first, "--glob", "**", "--yes")
    # No file is left, so the whole checkpoint is gone, as in Determined.
    assert json.loads(cluster.det("c", "describe", first, "--json").stdout)["state"] == "DELETED"
    proc = cluster.det("checkpoint", "rm", "no-such-uuid", "--glob", "*", "--yes", check=False)
    assert proc.returncode == 1 and "no-such-uuid" in proc.stderr
