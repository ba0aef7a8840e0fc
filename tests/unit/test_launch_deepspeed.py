from __future__ import annotations

from collections.abc import Sequence

from determined.launch.deepspeed import build_command, host_names, plan, visible_gpus

WORKER = ["python3", "train.py"]


def command(
    *,
    slots: Sequence[int] = (2, 2),
    include: str | None = None,
    master_port: int | None = 29500,
    overrides: Sequence[str] = (),
) -> list[str]:
    return build_command(
        hostfile="/tmp/hostfile",
        master_addr="10.0.0.1",
        master_port=master_port,
        node_rank=1,
        slots=slots,
        include=include,
        overrides=overrides,
        worker=WORKER,
    )


def runner_flags(cmd: list[str]) -> list[str]:
    return cmd[3 : cmd.index("--")]


def test_each_container_runs_its_own_share_without_ssh() -> None:
    cmd = command()
    assert cmd[:3] == ["python3", "-m", "deepspeed.launcher.runner"]
    assert runner_flags(cmd) == [
        "--hostfile", "/tmp/hostfile",
        "--master_addr", "10.0.0.1",
        "--node_rank", "1",
        "--no_ssh",
        "--no_python",
        "--no_local_rank",
        "--master_port", "29500",
        "--num_nodes", "2",
        "--num_gpus", "2",
    ]  # fmt: skip


def test_workers_run_under_wrap_rank_with_the_rank_deepspeed_sets() -> None:
    cmd = command()
    assert cmd[cmd.index("--") :] == [
        "--", "python3", "-m", "determined.launch.wrap_rank", "RANK", "--", *WORKER
    ]  # fmt: skip


def test_uneven_slot_counts_leave_the_per_node_count_to_the_hostfile() -> None:
    flags = runner_flags(command(slots=(2, 1)))
    assert "--num_gpus" not in flags and flags[-2:] == ["--num_nodes", "2"]


def test_an_include_filter_replaces_node_and_gpu_counts() -> None:
    flags = runner_flags(command(include="a@b:2,3"))
    assert flags[-2:] == ["--include", "a@b:2,3"]
    assert "--num_nodes" not in flags and "--num_gpus" not in flags


def test_user_filters_and_port_replace_ours() -> None:
    flags = runner_flags(
        command(master_port=None, overrides=["--exclude", "b:0", "--master_port=7"])
    )
    assert "--num_nodes" not in flags and "--num_gpus" not in flags
    assert flags.count("--master_port") == 0 and flags[-3:] == [
        "--exclude",
        "b:0",
        "--master_port=7",
    ]


def test_hostfile_lists_every_container_with_its_slots() -> None:
    lines, include = plan([("10.0.0.1", 2), ("10.0.0.2", 2)], 0, None)
    assert lines == ["10.0.0.1 slots=2", "10.0.0.2 slots=2"]
    assert include is None


def test_containers_sharing_an_address_get_distinct_names() -> None:
    assert host_names(["127.0.0.1", "127.0.0.1"]) == ["node-0", "node-1"]
    assert host_names(["a", "b"]) == ["a", "b"]


def test_specific_gpus_are_kept_through_an_include_filter() -> None:
    lines, include = plan([("a", 2), ("b", 2)], 1, [2, 3])
    assert lines == ["a slots=2", "b slots=4"]
    assert include == "a@b:2,3"


def test_gpus_zero_to_n_need_no_filter() -> None:
    assert plan([("a", 2)], 0, [0, 1]) == (["a slots=2"], None)


def test_visible_gpus_reads_numbers_only() -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == [2, 3]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-abc"}) is None
    assert visible_gpus({}) is None
