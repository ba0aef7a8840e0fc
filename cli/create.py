"""`det experiment create` and the waiting it shares with `wait` and `logs`.

Order matters for the user: flags, then the config (all problems at once), then the context
(size and links), and only then the network. A bad config therefore fails the same way with
or without a running master, and nothing is uploaded that the master would refuse.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile

from determined.api.gen import v1
from determined.common import client, errors
from determined.common.context import pack_context
from pydet.cli import Subparsers, config, render, rpc, testmode, trial

TERMINAL_STATES = frozenset(
    {v1.State.COMPLETED, v1.State.CANCELED, v1.State.ERROR, v1.State.DELETED}
)


def add_create_parser(verbs: Subparsers) -> None:
    p = verbs.add_parser("create", help="create an experiment from a config and a directory")
    p.add_argument("config_file", metavar="CONFIG", help="experiment config (YAML)")
    p.add_argument(
        "context_dir",
        metavar="CONTEXT",
        nargs="?",
        help="directory with the code to upload (none: the entrypoint is in the image)",
    )
    p.add_argument(
        "-f",
        "--follow-first-trial",
        action="store_true",
        help="print the first trial's logs; exit 0 only if the experiment completes",
    )
    p.add_argument("--paused", action="store_true", help="create the experiment paused")
    config.add_override_argument(p)
    p.add_argument(
        "--template",
        metavar="NAME",
        help="merge the config over this template (det template list shows them)",
    )
    p.add_argument(
        "-i",
        "--include",
        action="append",
        default=[],
        metavar="PATH",
        help="also upload this file or directory, at the context's top level (repeatable)",
    )
    p.add_argument(
        "--project_id",
        type=int,
        default=0,
        metavar="N",
        help="the project to create it in (default: the one the config names, else Uncategorized)",
    )
    p.add_argument("-t", "--test-mode", action="store_true", help="run a shortened experiment")
    p.add_argument("--local", action="store_true", help="run on this machine, not the cluster")
    p.set_defaults(func=create, parser=p)


def create(args: argparse.Namespace) -> int:
    if args.follow_first_trial and args.paused:
        args.parser.error("--follow-first-trial cannot be used with --paused")
    if args.local and args.paused:
        args.parser.error("--local cannot be used with --paused")
    text = config.load(args.config_file, args.config_overrides, args.template)
    context = _context(args.context_dir, args.include)
    if args.local:
        run_text = testmode.shorten(text) if args.test_mode else text
        with testmode.LocalCluster(testmode.slots_needed(run_text)) as local:
            return _submit(local.address, run_text, context, paused=False, follow=True)
    project_id = args.project_id
    if args.test_mode:
        print("Running the experiment in test mode first", flush=True)
        code = _submit(
            args.master,
            testmode.shorten(text),
            context,
            paused=False,
            follow=True,
            project_id=project_id,
        )
        if code != 0:
            print("Test mode failed; the experiment was not created", file=sys.stderr)
            return code
        print("Test mode passed; creating the experiment", flush=True)
    return _submit(
        args.master,
        text,
        context,
        paused=args.paused,
        follow=args.follow_first_trial,
        project_id=project_id,
    )


def _context(context_dir: str | None, includes: list[str]) -> bytes:
    """The packed context; without a directory (code that lives in the image, as Determined
    allows) an empty one with only the ``--include`` paths."""
    if context_dir is not None:
        return pack_context(context_dir, includes=includes)
    with tempfile.TemporaryDirectory(prefix="det-context-") as empty:
        return pack_context(empty, includes=includes)


def _submit(
    master: str | None,
    text: str,
    context: bytes,
    *,
    paused: bool,
    follow: bool,
    project_id: int = 0,
) -> int:
    request = v1.CreateExperimentRequest(
        config=text, context=context, activate=not paused, project_id=project_id
    )

    async def body(s: client.Session) -> int:
        response = await s.call(s.stub.create_experiment(request))
        exp_id: int = rpc.present(response.experiment, "experiment").id
        print(f"Created experiment {exp_id}", flush=True)
        for warning in response.warning_messages:
            print(f"Warning: {warning}", file=sys.stderr)
        if not follow:
            return 0
        return await follow_first_trial(s, exp_id)

    return rpc.run(master, body)


async def follow_first_trial(s: client.Session, exp_id: int) -> int:
    """Stream the first trial's logs, then report how the experiment ended."""
    print("Waiting for the first trial to start...", flush=True)
    trial_id = await first_trial(s, exp_id, wait=True)
    if trial_id is not None:
        print(f"Following the logs of trial {trial_id}", flush=True)
        await trial.print_logs(s, v1.TrialLogsRequest(trial_id=trial_id, follow=True))
    state = await wait_for_end(s, exp_id, interval=1.0)
    return report_end(exp_id, state)


async def first_trial(s: client.Session, exp_id: int, *, wait: bool) -> int | None:
    """The lowest trial id of the experiment.

    With `wait`, poll until one exists; None if the experiment ended without any trial.
    Without, a missing trial is an error.
    """
    delay = 0.2
    while True:
        resp = await s.call(
            s.stub.get_experiment_trials(v1.GetExperimentTrialsRequest(experiment_id=exp_id))
        )
        if resp.trials:
            return min(int(t.id) for t in resp.trials)
        if not wait:
            raise errors.NotFound(f"experiment {exp_id} has no trials yet")
        exp = await get_experiment(s, exp_id)
        if exp.state in TERMINAL_STATES:
            return None
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


async def get_experiment(s: client.Session, exp_id: int) -> v1.Experiment:
    resp = await s.call(s.stub.get_experiment(v1.GetExperimentRequest(experiment_id=exp_id)))
    return rpc.present(resp.experiment, "experiment")


async def wait_for_end(s: client.Session, exp_id: int, *, interval: float) -> v1.State:
    while True:
        exp = await get_experiment(s, exp_id)
        if exp.state in TERMINAL_STATES:
            return exp.state
        await asyncio.sleep(interval)


def report_end(exp_id: int, state: v1.State) -> int:
    """Print the outcome; the exit status says whether it completed (for scripts and CI)."""
    print(f"Experiment {exp_id} finished with state {render.state_name(state)}", flush=True)
    return 0 if state == v1.State.COMPLETED else 1
