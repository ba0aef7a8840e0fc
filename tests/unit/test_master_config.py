from __future__ import annotations

import pathlib
import re
from datetime import timedelta

import pytest

from determined.common import errors
from pydet.master import config


def load(tmp_path: pathlib.Path, text: str, *flags: str) -> config.MasterConfig:
    f = tmp_path / "master.yaml"
    f.write_text(text)
    return config.load(config.parser().parse_args(["--config-file", str(f), *flags]))


def test_flags_override_the_file(tmp_path: pathlib.Path) -> None:
    cfg = load(tmp_path, "port: 9000\ndata_dir: /tmp/x\n", "--port", "9100")
    assert cfg.port == 9100
    assert cfg.data_dir == pathlib.Path("/tmp/x")


def test_default_checkpoint_storage_lives_under_the_data_dir(tmp_path: pathlib.Path) -> None:
    cfg = load(tmp_path, f"data_dir: {tmp_path}\n")
    assert cfg.storage() == {"type": "shared_fs", "host_path": str(tmp_path / "checkpoints")}


def test_unknown_key_is_named(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidArgument, match="prot: unknown key"):
        load(tmp_path, "prot: 1\n")


def test_resource_pools_are_read(tmp_path: pathlib.Path) -> None:
    cfg = load(
        tmp_path,
        "resource_pools:\n- pool_name: gpu\n  scheduler: {type: fair_share}\n- pool_name: cpu\n"
        "default_resource_pool: cpu\n",
    )
    assert [p.name for p in cfg.resource_pools] == ["gpu", "cpu"]
    assert cfg.resource_pools[0].scheduler == "fair_share"
    assert cfg.default_resource_pool == "cpu"


def test_a_webui_dir_from_the_file_or_a_flag_is_served_instead(tmp_path: pathlib.Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "flag").mkdir()
    assert load(tmp_path, "port: 9000\n").webui_dir is None
    assert load(tmp_path, f"webui_dir: {tmp_path / 'dev'}\n").webui_dir == tmp_path / "dev"
    cfg = load(tmp_path, f"webui_dir: {tmp_path / 'dev'}\n", "--webui-dir", str(tmp_path / "flag"))
    assert cfg.webui_dir == tmp_path / "flag"


def test_a_webui_dir_that_is_not_a_directory_is_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidArgument, match=r"webui_dir: .*/nowhere is not a directory"):
        load(tmp_path, "", "--webui-dir", str(tmp_path / "nowhere"))


def test_the_webhook_signing_key_is_read_and_a_bad_one_refused(tmp_path: pathlib.Path) -> None:
    assert load(tmp_path, "port: 9000\n").webhook_signing_key is None
    assert load(tmp_path, "webhooks: {signing_key: s3cret}\n").webhook_signing_key == "s3cret"
    for bad in ("webhooks: {signing_key: 5}", "webhooks: {signing_key: ''}", "webhooks: {key: x}"):
        with pytest.raises(errors.InvalidArgument, match="master config: webhooks"):
            load(tmp_path, bad + "\n")


def test_the_store_is_sqlite_unless_the_db_names_a_postgres(tmp_path: pathlib.Path) -> None:
    assert load(tmp_path, "port: 9000\n").db == config.DbConfig()
    assert load(tmp_path, "db: {type: sqlite}\n").db.type == "sqlite"
    password = tmp_path / "password"
    password.write_text("secret\n")
    cfg = load(
        tmp_path,
        f"db: {{type: postgres, host: db.example, port: 5433, name: det, user: det,"
        f" password_file: {password}}}\n",
    ).db
    assert cfg == config.DbConfig("postgres", "db.example", 5433, "det", "det", password)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("db: postgres", "db: expected a mapping"),
        ("db: {type: mysql}", "db.type: expected sqlite or postgres"),
        ("db: {type: postgres, prot: 1}", "db.prot: unknown key"),
        ("db: {type: sqlite, host: x}", "db.host: only for db.type postgres"),
        ("db: {type: postgres, port: 0}", "db.port: expected a port number"),
        ("db: {type: postgres, user: ''}", "db.user: expected a non-empty string"),
        ("db: {type: postgres, password_file: /nonexistent/pw}", "db.password_file: .* not a file"),
    ],
)
def test_a_bad_db_names_its_field(tmp_path: pathlib.Path, text: str, named: str) -> None:
    with pytest.raises(errors.InvalidArgument, match=named):
        load(tmp_path, text + "\n")


def test_log_retention_days_is_read_and_a_bad_one_named(tmp_path: pathlib.Path) -> None:
    assert load(tmp_path, "port: 9000\n").log_retention_days is None
    got = load(tmp_path, "retention_policy: {log_retention_days: 90}\n")
    assert got.log_retention_days == 90
    for bad, named in (
        ("retention_policy: {log_retention_days: x}", "retention_policy.log_retention_days"),
        ("retention_policy: {log_retention_days: -2}", "retention_policy.log_retention_days"),
        ("retention_policy: {days: 3}", "retention_policy: expected a mapping"),
    ):
        with pytest.raises(errors.InvalidArgument, match=named):
            load(tmp_path, bad + "\n")


def test_task_container_defaults_give_interactive_tasks_a_working_directory(
    tmp_path: pathlib.Path,
) -> None:
    assert load(tmp_path, "port: 9000\n").task_defaults() == {}
    got = load(tmp_path, "task_container_defaults: {work_dir: /srv/work}\n")
    assert got.task_defaults() == {
        "work_dir": "/srv/work",
        "bind_mounts": [{"host_path": "/srv/work", "container_path": "/srv/work"}],
    }
    for bad, named in (
        ("task_container_defaults: {work_dir: rel/dir}", "work_dir: expected an absolute path"),
        ("task_container_defaults: {shm_size: 4}", "expected a mapping with work_dir"),
    ):
        with pytest.raises(errors.InvalidArgument, match=named):
            load(tmp_path, bad + "\n")


def test_access_token_lifespans_are_read_as_determined_has_them(tmp_path: pathlib.Path) -> None:
    default = load(tmp_path, "port: 9000\n").security.token
    assert (default.default_days, default.max_days) == (30, 30)
    got = load(tmp_path, "security: {token: {max_lifespan_days: -1, default_lifespan_days: 7}}\n")
    assert (got.security.token.default_days, got.security.token.max_days) == (7, 106751)
    for bad, named in (
        ("{token: {max_lifespan_days: x}}", "security.token.max_lifespan_days"),
        ("{token: {default_lifespan_days: -3}}", "security.token.default_lifespan_days"),
        ("{token: {max_lifespan_days: 5}}", "default_lifespan_days: longer than max"),
        ("{token: {days: 3}}", "security.token.days: unknown key"),
        ("{token: 3}", "security.token: expected a mapping"),
    ):
        with pytest.raises(errors.InvalidArgument, match=named):
            load(tmp_path, f"security: {bad}\n")


SLURM_POOL = (
    "resource_pools:\n- pool_name: default\n- pool_name: hpc\n  type: slurm\n"
    "  partition: gpu\n  slots_per_node: 8\n  gres: gpu\n  sbatch_args: [--qos=low]\n"
    "  job_storage_root: /shared/pydet\n"
)


def test_a_slurm_pool_is_read(tmp_path: pathlib.Path) -> None:
    agents, slurm = load(tmp_path, SLURM_POOL).resource_pools
    assert agents.slurm is None
    assert slurm.slurm is not None
    assert (slurm.slurm.pool_name, slurm.slurm.partition, slurm.slurm.gres) == ("hpc", "gpu", "gpu")
    assert (slurm.slurm.slots_per_node, slurm.slurm.nodes) == (8, None)
    assert slurm.slurm.sbatch_args == ("--qos=low",)
    assert slurm.slurm.job_storage_root == "/shared/pydet"
    assert slurm.slurm.time_limit is None


@pytest.mark.parametrize(
    ("written", "minutes"),
    [("90", 90), ("'90'", 90), ("'1:30:00'", 90), ("'0-01:30'", 90), ("'1-0'", 1440)],
)
def test_a_slurm_pool_time_limit_reads_as_slurm_does(
    tmp_path: pathlib.Path, written: str, minutes: int
) -> None:
    text = SLURM_POOL.replace("gres: gpu", f"gres: gpu\n  time_limit: {written}")
    slurm = load(tmp_path, text).resource_pools[1].slurm
    assert slurm is not None and slurm.time_limit == timedelta(minutes=minutes)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (("type: slurm", "type: pbs"), "resource_pools[1].type: expected agent or slurm"),
        (("slots_per_node: 8", "slots_per_node: 0"), "resource_pools[1].slots_per_node:"),
        (("slots_per_node: 8", "slots_per_node: two"), "resource_pools[1].slots_per_node:"),
        (("[--qos=low]", "[--partition=x]"), "resource_pools[1].sbatch_args: --partition is set"),
        (("[--qos=low]", "[qos]"), "resource_pools[1].sbatch_args: 'qos' is not an sbatch"),
        (("/shared/pydet", "shared"), "resource_pools[1].job_storage_root: expected the abs"),
        (("gres: gpu", "gres: ''"), "resource_pools[1].gres: expected a non-empty string"),
        (("gres: gpu", "gpus: 2"), "resource_pools[1].gpus: unknown key for a slurm pool"),
        (("gres: gpu", "time_limit: 1h"), "resource_pools[1].time_limit: expected whole min"),
        (("gres: gpu", "time_limit: 0"), "resource_pools[1].time_limit: expected at least 1"),
    ],
)
def test_a_bad_slurm_pool_names_its_field(
    tmp_path: pathlib.Path, change: tuple[str, str], named: str
) -> None:
    with pytest.raises(errors.InvalidArgument, match=re.escape(named)):
        load(tmp_path, SLURM_POOL.replace(*change))
