from __future__ import annotations

from determined.launch.horovod import build_command

WORKER = ["python3", "train.py"]


def test_horovodrun_gets_total_processes_and_hosts_with_slots() -> None:
    cmd = build_command(nodes=[("10.0.0.1", 4), ("10.0.0.2", 4)], overrides=[], worker=WORKER)
    assert cmd == [
        "horovodrun",
        "-np", "8",
        "-H", "10.0.0.1:4,10.0.0.2:4",
        "python3", "-m", "determined.launch.wrap_rank",
        "HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK", "--",
        *WORKER,
    ]  # fmt: skip


def test_overrides_follow_our_flags_and_replace_the_same_flag() -> None:
    cmd = build_command(
        nodes=[("a", 1)],
        overrides=["--num-proc", "1", "--fusion-threshold-mb", "1"],
        worker=WORKER,
    )
    assert cmd[:7] == ["horovodrun", "-H", "a:1", "--num-proc", "1", "--fusion-threshold-mb", "1"]
    assert "-np" not in cmd
