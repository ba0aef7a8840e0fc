from __future__ import annotations

from collections.abc import Sequence

from determined.launch.torch_distributed import build_command

WORKER = ["python3", "train.py", "--lr", "0.1"]


def command(
    *,
    master_port: int | None = 29500,
    overrides: Sequence[str] = (),
    python: str = "python3",
) -> list[str]:
    return build_command(
        nnodes=2,
        nproc_per_node=4,
        node_rank=1,
        master_addr="10.0.0.1",
        master_port=master_port,
        overrides=overrides,
        worker=WORKER,
        python=python,
    )


def torchrun_flags(cmd: list[str]) -> list[str]:
    return cmd[3 : cmd.index("--no-python")]


def test_defaults_describe_the_rendezvous() -> None:
    cmd = command()
    assert cmd[:3] == ["python3", "-m", "torch.distributed.run"]
    assert torchrun_flags(cmd) == [
        "--nnodes", "2",
        "--nproc_per_node", "4",
        "--node_rank", "1",
        "--master_addr", "10.0.0.1",
        "--master_port", "29500",
    ]  # fmt: skip


def test_workers_run_under_wrap_rank_after_no_python() -> None:
    cmd = command()
    tail = cmd[cmd.index("--no-python") :]
    assert tail == [
        "--no-python", "--",
        "python3", "-m", "determined.launch.wrap_rank", "RANK", "--",
        *WORKER,
    ]  # fmt: skip


def test_an_override_replaces_our_value_instead_of_repeating_it() -> None:
    flags = torchrun_flags(command(overrides=["--nproc_per_node", "8", "--max-restarts=2"]))
    assert flags.count("--nproc_per_node") == 1
    assert flags[flags.index("--nproc_per_node") + 1] == "8"
    assert "--max-restarts=2" in flags


def test_dashed_and_equals_overrides_replace_underscored_defaults() -> None:
    flags = torchrun_flags(command(overrides=["--master-port=1234", "--node-rank", "0"]))
    assert "--master_port" not in flags and "--node_rank" not in flags
    assert flags[-3:] == ["--master-port=1234", "--node-rank", "0"]


def test_no_port_flag_when_the_user_chose_one() -> None:
    flags = torchrun_flags(command(master_port=None, overrides=["--master_port", "5555"]))
    assert flags.count("--master_port") == 1


def test_interpreter_is_configurable() -> None:
    cmd = command(python="/venv/bin/python")
    assert cmd[0] == "/venv/bin/python"
    assert "/venv/bin/python" in cmd[cmd.index("--no-python") :]
