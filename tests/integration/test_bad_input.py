"""Bad input gets a clear error and loses nothing."""

from __future__ import annotations

import pathlib

from tests.cluster import EXAMPLES, Cluster, free_port


def test_entrypoint_missing_from_context_is_created_with_a_warning(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    # As in Determined: the image may provide the file, so it is said, not refused.
    (tmp_path / "ctx").mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "entrypoint: python3 nowhere.py\nsearcher: {name: single, metric: x}\nmax_restarts: 0\n"
    )
    proc = cluster.det("experiment", "create", str(cfg), str(tmp_path / "ctx"), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Warning: entrypoint: nowhere.py is not in the context directory" in proc.stderr
    assert "Traceback" not in proc.stderr
    exp_id = int(proc.stdout.split("Created experiment ", 1)[1].split()[0])
    assert cluster.wait_state(exp_id, "ERROR") == "ERROR"  # no image provided it here
    log = (cluster.root / "master.log").read_text()
    assert f"experiment {exp_id}: entrypoint: nowhere.py is not in the context" in log


def test_unknown_config_key_names_the_path(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "entrypoint: python3 train.py\nsearcher: {name: single, metric: x, max_trails: 3}\n"
    )
    proc = cluster.det("experiment", "create", str(cfg), str(EXAMPLES / "minimal"), check=False)
    assert proc.returncode == 1
    assert "searcher.max_trails" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_experiment_id_says_which(cluster: Cluster) -> None:
    proc = cluster.det("experiment", "describe", "4242", check=False)
    assert proc.returncode == 1
    assert "experiment 4242 not found" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_dead_master_is_reported(cluster: Cluster) -> None:
    proc = cluster.det("-m", f"127.0.0.1:{free_port()}", "experiment", "list", check=False)
    assert proc.returncode == 1
    assert "cannot reach the master" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_oversized_context_names_its_size_and_suggests_detignore(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text("print('hi')\n")
    with open(ctx / "data.bin", "wb") as f:
        f.truncate(96 * 1024 * 1024)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("entrypoint: python3 train.py\nsearcher: {name: single, metric: x}\n")
    proc = cluster.det("experiment", "create", str(cfg), str(ctx), check=False)
    assert proc.returncode == 1
    assert "96.0 MiB" in proc.stderr and ".detignore" in proc.stderr
    (ctx / ".detignore").write_text("data.bin\n")
    assert cluster.create(cfg, ctx) > 0


def test_symlink_leaving_the_context_is_rejected(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "train.py").write_text("print('hi')\n")
    (ctx / "secrets").symlink_to("/etc")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("entrypoint: python3 train.py\nsearcher: {name: single, metric: x}\n")
    proc = cluster.det("experiment", "create", str(cfg), str(ctx), check=False)
    assert proc.returncode == 1
    assert "secrets" in proc.stderr and "outside" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_malformed_yaml_says_where(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("entrypoint: python3 train.py\nsearcher: [unclosed\n")
    proc = cluster.det("experiment", "create", str(cfg), str(EXAMPLES / "minimal"), check=False)
    assert proc.returncode == 1
    assert "line" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_searcher_determined_no_longer_runs_is_refused_by_name(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "entrypoint: python3 train.py\n"
        "searcher: {name: sync_halving, metric: x, num_rungs: 3, budget: {batches: 9},"
        " max_length: {batches: 3}}\n"
    )
    proc = cluster.det("experiment", "create", str(cfg), str(EXAMPLES / "minimal"), check=False)
    assert proc.returncode == 1
    assert "pydet does not run the sync_halving searcher" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_determined_sections_pydet_does_not_act_on_are_noted_at_create(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        (EXAMPLES / "minimal" / "const.yaml").read_text()
        + "slurm: {sbatch_args: [--exclusive]}\nsecurity: {kerberos: {config_file: /k}}\n"
    )
    exp_id = cluster.create(cfg, EXAMPLES / "minimal", "--paused")
    note = f"experiment {exp_id} sets slurm, security: accepted for compatibility with Determined"
    assert note in (cluster.root / "master.log").read_text()
    assert cluster.experiment(exp_id)["config"]["slurm"] == {"sbatch_args": ["--exclusive"]}
