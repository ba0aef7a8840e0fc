"""``python3 -m determined.exec.launch``: the first process of every trial container, and of
every command's, notebook's and shell's (``launch_task``: the context it was launched with,
then its entrypoint, or JupyterLab: ``determined.exec.notebook``, or sshd:
``determined.exec.shell``).

The agent starts it in an empty working directory with the task's ``DET_*`` environment.
It downloads the experiment's context from the master (or takes the agent's copy of it:
``determined.launch.context_cache``) into that directory, runs
``startup-hook.sh`` if the context has one, and then runs the experiment's entrypoint:

- a string: ``sh -c STRING``;
- a list: that argv;
- a legacy Trial class, ``module:ClassName`` (``model_def:MyTrial``): Determined picks
  Horovod for it, but Horovod cannot build against the torch that pydet supports, so pydet
  runs ``python3 -m determined.launch.torch_distributed --trial model_def:MyTrial``.

An entrypoint that only runs a Python script with this interpreter (``python3 train.py
--lr 0.1``) runs in a fork of the launcher instead, as ``python3`` would run it, without a new
interpreter and its imports (``determined.exec._script``). An agent keeps one launcher
loaded as a template and forks it per trial (``determined.exec._zygote``).

SIGTERM and SIGINT are passed on to the entrypoint's process group; the exit status is the
entrypoint's (128+N if a signal N ended it).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import determined as det
from determined.common import errors
from determined.common.context_archive import unpack_context
from determined.exec import _script
from determined.launch import context_cache, rpc
from determined.launch._supervisor import Worker, supervise

log = logging.getLogger("determined.exec.launch")

STARTUP_HOOK = "startup-hook.sh"
_LEGACY_TRIAL = re.compile(r"[A-Za-z_][\w.]*(?:/[A-Za-z_][\w.]*)*:[A-Za-z_]\w*")


class InvalidEntrypoint(errors.InvalidArgument):
    """The experiment config's ``entrypoint`` is missing or not a string or list of strings."""


def is_legacy_trial(entrypoint: str) -> bool:
    """Whether ``entrypoint`` names a Trial class (``model_def:MyTrial``) instead of a command."""
    return _LEGACY_TRIAL.fullmatch(entrypoint.strip()) is not None


def entrypoint_argv(entrypoint: Any, *, python: str = "python3") -> list[str]:
    """The command an experiment config's ``entrypoint`` stands for.

    Raises:
        InvalidEntrypoint: it is missing, empty, or not a string or a list of strings.
    """
    if isinstance(entrypoint, str) and entrypoint.strip():
        if is_legacy_trial(entrypoint):
            trial = entrypoint.strip()
            return [python, "-m", "determined.launch.torch_distributed", "--trial", trial]
        return ["sh", "-c", entrypoint]
    if (
        isinstance(entrypoint, list)
        and entrypoint
        and all(isinstance(word, str) for word in entrypoint)
    ):
        return list(entrypoint)
    raise InvalidEntrypoint(
        f"entrypoint must be a command string or a list of strings, not {entrypoint!r}"
    )


def _child_env() -> dict[str, str]:
    # Our stdout is the task log: Python code should write lines as it prints them.
    return {"PYTHONUNBUFFERED": "1", **os.environ}


def run_startup_hook(directory: str | os.PathLike[str], env: Mapping[str, str]) -> int:
    """Run ``sh startup-hook.sh`` in ``directory`` if it exists; its exit status, else 0."""
    if not (Path(directory) / STARTUP_HOOK).is_file():
        return 0
    log.info("running %s", STARTUP_HOOK)
    return supervise([Worker(["sh", STARTUP_HOOK], env=env, cwd=os.fspath(directory))])


def run_task(
    directory: str | os.PathLike[str],
    entrypoint: Any,
    *,
    python: str = "python3",
    fork_scripts: bool = False,
) -> int:
    """Everything after the download: the startup hook, then the entrypoint; an exit status.

    ``fork_scripts``: a plain ``python3 script.py`` entrypoint runs in a fork of this process
    (``determined.exec._script``); only for the launcher's own process, which ends with it.
    """
    try:
        argv = entrypoint_argv(entrypoint, python=python)
    except InvalidEntrypoint as e:
        print(f"cannot start the task: {e.message}", file=sys.stderr, flush=True)
        return 1
    env = _child_env()
    code = run_startup_hook(directory, env)
    if code != 0:
        print(f"{STARTUP_HOOK} failed with exit code {code}", file=sys.stderr, flush=True)
        return code
    script, args = _script.forkable(argv, env, os.fspath(directory)) if fork_scripts else ("", [])
    if script:
        log.info("running the entrypoint in a fork of the launcher: %s", argv)
        child = functools.partial(_script.run, script, args)
        code = supervise([Worker(argv, child=child)])
    else:
        log.info("running the entrypoint: %s", argv)
        code = supervise([Worker(argv, env=env, cwd=os.fspath(directory))])
    log.info("the entrypoint exited with status %d", code)
    return code


# Set by the agent: this process is its launcher template, on the control socket it names.
ZYGOTE_ENV = "PYDET_LAUNCH_ZYGOTE"


def main() -> int:
    control = os.environ.pop(ZYGOTE_ENV, "")
    if control:
        from determined.exec import _zygote

        return _zygote.serve(int(control), _script.preload, launch)
    return launch()


def launch() -> int:
    """The launcher's work in this process, as the module docstring says; an exit status."""
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a TextIOWrapper
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    if info is None:
        print(
            "determined.exec.launch starts a task's entrypoint and runs only inside a pydet "
            "task (DET_ALLOCATION_ID is not set); run your script directly instead",
            file=sys.stderr,
        )
        return 2
    if info.trial is None:
        return launch_task(info)
    data, source = context_cache.load(os.environ), "the agent's copy"
    if data is None:
        try:
            data, source = rpc.fetch_context(info, info.trial.experiment_id), "downloaded"
        except errors.DetError as e:
            print(f"cannot download the experiment's context: {e.message}", file=sys.stderr)
            return 1
        context_cache.store(os.environ, data)
    try:
        unpack_context(data, os.getcwd())
    except (errors.DetError, OSError) as e:
        print(f"cannot unpack the experiment's context: {e}", file=sys.stderr, flush=True)
        return 1
    log.info("unpacked the context (%s, %d bytes packed) into %s", source, len(data), os.getcwd())
    entrypoint = info.trial.config.get("entrypoint")
    return run_task(os.getcwd(), entrypoint, python=sys.executable, fork_scripts=True)


# A command's, notebook's or shell's config (JSON), and "1" when it has a context to fetch.
TASK_CONFIG_ENV = "DET_TASK_CONFIG"
TASK_CONTEXT_ENV = "DET_TASK_CONTEXT"


def launch_task(info: det.ClusterInfo) -> int:
    """A task that is not a trial (a command or generic task, a notebook, a shell): its
    context unpacked in its working directory (``work_dir``, else the one the agent gave it),
    then its work."""
    if info.task_type not in ("COMMAND", "NOTEBOOK", "SHELL", "GENERIC"):
        print(
            f"determined.exec.launch: cannot run a task of type {info.task_type!r} "
            "(DET_TRIAL_ID is not set)",
            file=sys.stderr,
        )
        return 1
    # The task's output is the user's command's: the launcher speaks only of problems.
    logging.getLogger().setLevel(logging.WARNING)
    config = json.loads(os.environ.get(TASK_CONFIG_ENV) or "{}")
    work_dir = config.get("work_dir") or os.getcwd()
    try:
        os.makedirs(work_dir, exist_ok=True)
        if os.environ.get(TASK_CONTEXT_ENV) == "1":
            data = rpc.fetch_task_context(info)
            unpack_context(data, work_dir)
            log.info("unpacked the context (%d bytes packed) into %s", len(data), work_dir)
        os.chdir(work_dir)
    except errors.DetError as e:
        print(f"cannot download the task's context: {e.message}", file=sys.stderr, flush=True)
        return 1
    except OSError as e:
        print(f"cannot prepare the working directory {work_dir}: {e}", file=sys.stderr, flush=True)
        return 1
    if info.task_type == "NOTEBOOK":
        from determined.exec import notebook

        return notebook.serve(config)
    if info.task_type == "SHELL":
        from determined.exec import shell

        return shell.serve(config)
    return run_task(work_dir, config.get("entrypoint"), python=sys.executable, fork_scripts=True)


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once its output is out, skipping the interpreter's
    teardown: nothing is left to clean up, and the agent (and then the master) learns of the
    task's end as soon as this process is gone."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
