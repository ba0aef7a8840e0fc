"""The benchmark's trial: trains ``op.length`` steps of ``work_s`` seconds each (a sleep:
the work itself costs no CPU, so what the machine spends is the platform's), reporting a
training metric per step and one validation metric per searcher operation.

Its validation metrics also carry wall-clock times for ``bench/search.py``'s breakdown of
the per-trial overhead: when the agent started ``python3 -m determined.exec.launch``
(``t_launch``) and this process (``t_proc``), both read from /proc; the first line of this
script before any import (``t_start``); ``det.core.init()`` returned (``t_ready``); the first
searcher operation arrived (``t_op``); the last step trained (``t_done``). The time the Core
API context finished closing is printed, for the same reason, as the last line of the log.
"""

import time

t_start = time.time()

import os  # noqa: E402

import determined as det  # noqa: E402


def started_at(pid):
    """When process ``pid`` started, in seconds since the epoch (10 ms resolution)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    with open("/proc/uptime") as f:
        booted = time.time() - float(f.read().split()[0])
    return booted + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def launcher_pid():
    # From the parent up: a script forked by the launcher has the launcher's command line.
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"determined.exec.launch" in f.read():
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return os.getpid()


hparams = det.get_cluster_info().trial.hparams
x, work_s = float(hparams["x"]), float(hparams["work_s"])
times = {"t_launch": started_at(launcher_pid()), "t_proc": started_at(os.getpid())}
times["t_start"] = t_start

with det.core.init() as core_context:
    times["t_ready"] = time.time()
    steps = 0
    for op in core_context.searcher.operations():
        times.setdefault("t_op", time.time())
        while steps < op.length:
            time.sleep(work_s)
            steps += 1
            core_context.train.report_training_metrics(steps, {"loss": x / steps})
        times["t_done"] = time.time()
        core_context.train.report_validation_metrics(steps, {"val_loss": x, **times})
        op.report_completed(x)
# The context is closed (metrics flushed, session ended): the agent timestamps this line.
print(f"bench: core closed at {time.time()}", flush=True)
