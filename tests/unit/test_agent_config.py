from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pydet.agent.config import AgentConfig, ConfigError, load


def test_defaults() -> None:
    cfg = load([], environ={})
    host = socket.gethostname()
    assert cfg == AgentConfig(
        master="localhost:8080",
        agent_id=host,
        slots=None,
        resource_pool="default",
        runtime="process",
        work_dir=Path(f"/tmp/pydet-agent-{host}"),
        address=None,
        log_level="INFO",
    )


def test_det_master_is_the_default_master() -> None:
    assert load([], environ={"DET_MASTER": "http://m:9000"}).master == "http://m:9000"
    assert load(["--master", "x:1"], environ={"DET_MASTER": "m:9000"}).master == "x:1"


def test_flags() -> None:
    cfg = load(
        [
            "--master=10.0.0.1:8080",
            "--agent-id=node-1",
            "--slots=0",
            "--resource-pool=gpu",
            "--runtime=docker",
            "--work-dir=/data/agent",
            "--address=10.0.0.2",
            "--log-level=debug",
        ],
        environ={},
    )
    assert (cfg.master, cfg.agent_id, cfg.slots, cfg.resource_pool) == (
        "10.0.0.1:8080",
        "node-1",
        0,
        "gpu",
    )
    assert (cfg.runtime, cfg.work_dir, cfg.address, cfg.log_level) == (
        "docker",
        Path("/data/agent"),
        "10.0.0.2",
        "DEBUG",
    )


def test_config_file_with_flags_winning(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("master: m:1\nagent_id: from-file\nslots: 4\nresource-pool: big\n")
    cfg = load(["--config-file", str(path), "--slots", "2"], environ={})
    assert (cfg.master, cfg.agent_id, cfg.slots, cfg.resource_pool) == (
        "m:1",
        "from-file",
        2,
        "big",
    )
    assert cfg.work_dir == Path("/tmp/pydet-agent-from-file")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("slots: 2\nbogus: 1\n", "bogus: unknown key"),
        ("slots: two\n", "slots: must be an integer"),
        ("slots: true\n", "slots: must be an integer"),
        ("- a\n- b\n", "expected a mapping"),
        ("slots: [1\n", "not valid YAML"),
        ("master: {a: 1}\n", "master: must be a string"),
    ],
)
def test_bad_config_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load(["--config-file", str(path)], environ={})
    assert str(path) in str(info.value)


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match=r"cannot read config file /no/such\.yaml"):
        load(["--config-file", "/no/such.yaml"], environ={})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--slots", "-1"], "slots: must be >= 0"),
        (["--slots", "many"], "--slots: invalid int value"),
        (["--runtime", "podman"], "runtime: must be one of process, docker"),
        (["--log-level", "loud"], "log_level: must be one of"),
        (["--agent-id", "a/b"], "agent_id"),
        (["--master", "host:port"], "master: bad master address"),
        (["--nope"], "unrecognized arguments: --nope"),
    ],
)
def test_bad_flags_are_one_clear_error(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load(argv, environ={})
    assert "\n" not in str(info.value)


def test_all_problems_are_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        load(["--slots", "-1", "--runtime", "x"], environ={})
    assert "slots" in str(info.value) and "runtime" in str(info.value)


def test_without_an_address_the_agent_uses_its_address_towards_the_master() -> None:
    from pydet.agent.daemon import address_towards

    assert load([], environ={}).address is None
    assert address_towards("localhost:8080") == "127.0.0.1"
    # A name that resolves to nothing: the daemon says so once and gives loopback.
    with pytest.raises(OSError):
        address_towards("no-such-host.invalid:8080")
