"""Reading the Slurm queue into job states and pending reasons (master/slurm/squeue.py).

The samples are what Slurm 22.05.8 printed on the cluster of scripts/slurm/start.sh.
"""

from __future__ import annotations

import json

import pytest

from pydet.master.slurm.squeue import SlurmJob, parse_squeue, parse_squeue_json

SQUEUE = """\
1|PENDING|PartitionConfig|
2|RUNNING|None|pydet1
3|PENDING|Resources|
4|CANCELLED|None|
5|COMPLETED|None|pydet1
6|FAILED|NonZeroExitCode|pydet1
7|PENDING|PartitionNodeLimit|
"""


def test_the_format_output_gives_states_reasons_and_phases() -> None:
    jobs = parse_squeue(SQUEUE)
    assert jobs[1] == SlurmJob(1, "PENDING", "PartitionConfig", ())
    assert jobs[2] == SlurmJob(2, "RUNNING", None, ("pydet1",))
    assert [jobs[i].phase for i in sorted(jobs)] == [
        "PENDING",
        "RUNNING",
        "PENDING",
        "CANCELED",
        "COMPLETED",
        "FAILED",
        "PENDING",
    ]
    # Waiting for busy CPUs may end; asking for more than the partition has never does.
    assert [i for i, job in sorted(jobs.items()) if job.never_runs] == [1, 7]


def test_malformed_lines_are_refused_and_blank_ones_skipped() -> None:
    assert parse_squeue("\n\n") == {}
    with pytest.raises(ValueError, match="unexpected squeue line"):
        parse_squeue("1 PENDING Resources")


def test_the_json_output_of_22_05() -> None:
    text = json.dumps(
        {
            "meta": {"Slurm": {"release": "22.05.8"}},
            "errors": [],
            "jobs": [
                {
                    "job_id": 1,
                    "job_state": "PENDING",
                    "state_reason": "PartitionConfig",
                    "nodes": "",
                },
                {"job_id": 2, "job_state": "CANCELLED", "state_reason": "None", "nodes": "pydet1"},
                # Later Slurm releases write the state as a list.
                {"job_id": 3, "job_state": ["RUNNING"], "state_reason": "None", "nodes": "n[1-2]"},
            ],
        }
    )
    jobs = parse_squeue_json(text)
    assert jobs[1].never_runs
    assert jobs[2] == SlurmJob(2, "CANCELLED", None, ("pydet1",))
    assert jobs[3].phase == "RUNNING"
    assert jobs[3].nodes == ("n[1-2]",)
    with pytest.raises(ValueError, match="reported errors"):
        parse_squeue_json(json.dumps({"errors": [{"error": "boom"}], "jobs": []}))
