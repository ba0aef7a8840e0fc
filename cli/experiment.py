"""`det experiment|e`: list, inspect and control experiments (creation lives in `create`)."""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any

import yaml

from determined.api.gen import v1
from determined.common import checkpoint_info, client, errors, expconf, structs
from pydet.cli import (
    Subparsers,
    checkpoint,
    config,
    create,
    experiment_edits,
    listing,
    pareto,
    project,
    render,
    retention,
    rpc,
    trial,
    workloads,
)

# verb -> (stub method, past tense for the confirmation line)
_ACTIONS = {
    "activate": ("activate_experiment", "Activated"),
    "pause": ("pause_experiment", "Paused"),
    "cancel": ("cancel_experiment", "Canceled"),
    "kill": ("kill_experiment", "Killed"),
    "archive": ("archive_experiment", "Archived"),
    "unarchive": ("unarchive_experiment", "Unarchived"),
}


def add_parser(nouns: Subparsers) -> None:
    exp = nouns.add_parser("experiment", aliases=["e"], help="create and manage experiments")
    verbs = exp.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    create.add_create_parser(verbs)

    p = verbs.add_parser("list", aliases=["ls"], help="list experiments")
    p.add_argument(
        "-a",
        "--all",
        action="store_true",
        help="show all experiments (including archived and other users')",
    )
    p.add_argument(
        "--project_id", type=int, default=0, metavar="N", help="only the experiments of project N"
    )
    p.add_argument(
        "--label",
        dest="labels",
        action="append",
        default=[],
        metavar="LABEL",
        help="only experiments with this label (repeatable: with every one of them)",
    )
    p.add_argument("--show_project", action="store_true", help="add workspace and project columns")
    listing.add_format_flags(p)
    listing.add_pagination(p)
    p.set_defaults(func=list_experiments)

    p = _with_id(verbs, "move", "move an experiment to another project")
    p.add_argument("workspace_name", metavar="WORKSPACE", help="the destination's workspace")
    p.add_argument("project_name", metavar="PROJECT", help="the destination project")
    p.set_defaults(func=move)

    p = verbs.add_parser("describe", help="show experiments and their trials")
    p.add_argument(
        "experiment_ids", type=_id_list, metavar="EXPERIMENT_IDS", help="comma-separated ids"
    )
    p.add_argument(
        "--metrics", action="store_true", help="also show every trial's reported metrics"
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--csv", action="store_true", help="print the tables as CSV")
    fmt.add_argument(
        "--outdir",
        type=pathlib.Path,
        metavar="DIR",
        help="write experiments.csv, trials.csv and workloads.csv to DIR",
    )
    p.set_defaults(func=describe)
    _with_id(verbs, "config", "print an experiment's filled config").set_defaults(func=show_config)
    p = _with_id(verbs, "list-trials", "list its trials", aliases=["lt"])
    listing.add_format_flags(p)
    listing.add_pagination(p)
    p.set_defaults(func=list_trials)
    p = _with_id(verbs, "list-checkpoints", "list its checkpoints", aliases=["lc"])
    checkpoint.add_list_flags(p)
    p.set_defaults(func=checkpoint.list_checkpoints)
    p = _with_id(verbs, "download", "download its best checkpoints")
    p.add_argument("--top-n", type=int, default=1, metavar="N", help="the N best (default 1)")
    trial.add_sort_flags(p)
    checkpoint.add_download_flags(p)
    p.set_defaults(func=download, parser=p)

    p = _with_id(verbs, "wait", "wait for an experiment to end; exit 0 only if it completed")
    p.add_argument(
        "--interval",
        "--polling-interval",
        dest="interval",
        type=float,
        default=2.0,
        metavar="S",
        help="poll every S seconds",
    )
    p.set_defaults(func=wait)

    for verb in _ACTIONS:
        # `det e unpause` is Determined's other name for activate.
        aliases = ["unpause"] if verb == "activate" else None
        _with_id(verbs, verb, f"{verb} an experiment", aliases=aliases).set_defaults(func=action)

    p = _with_id(
        verbs,
        "continue",
        "run an ended experiment's unfinished trials again (a single trial from its latest "
        "checkpoint, with --config changes), or raise a search's max_trials",
    )
    p.add_argument(
        "--max-trials",
        type=int,
        metavar="N",
        help="the search's new budget (more than now); a completed search is reactivated",
    )
    config.add_override_argument(p)
    p.add_argument(
        "--config-file",
        metavar="FILE",
        help="YAML merged over the experiment's config (single-trial experiments)",
    )
    p.add_argument(
        "-f",
        "--follow-first-trial",
        action="store_true",
        help="stream the trial's logs until the experiment ends",
    )
    p.set_defaults(func=continue_experiment)

    p = _with_id(verbs, "delete", "delete an experiment with its checkpoints and logs")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=delete)

    p = _with_id(verbs, "logs", "print the logs of the experiment's first trial")
    trial.add_log_flags(p)
    p.add_argument("--json", action="store_true", help="print each line as a JSON object")
    p.set_defaults(func=logs)
    retention.add_download_model_def_parser(verbs)
    experiment_edits.add_label_parser(verbs)
    experiment_edits.add_delete_tb_files_parser(verbs)
    _add_set_parser(verbs)


def _with_id(
    verbs: Subparsers,
    name: str,
    help_text: str,
    *,
    aliases: list[str] | None = None,
    json_flag: bool = False,
) -> argparse.ArgumentParser:
    p = verbs.add_parser(name, aliases=aliases or [], help=help_text)
    p.add_argument("experiment_id", type=int, metavar="EXPERIMENT_ID")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(action_name=name)
    return p


def list_experiments(args: argparse.Namespace) -> int:
    """As Determined: your own unarchived experiments; with -a/--all everybody's, archived
    ones too (and an Archived column)."""

    async def body(s: client.Session) -> list[v1.Experiment]:
        request = v1.GetExperimentsRequest(project_id=args.project_id, labels=args.labels)
        if not args.all:
            me = rpc.present((await s.call(s.stub.get_me(v1.GetMeRequest()))).user, "user")
            request.archived = False
            request.users = [me.username]
        return list((await s.call(s.stub.get_experiments(request))).experiments)

    experiments = listing.page(rpc.run(args.master, body), args)
    headers = [*render.EXPERIMENT_HEADERS, *(["Archived"] if args.all else [])]
    rows = [render.experiment_row(e) + ([e.archived] if args.all else []) for e in experiments]
    if args.show_project:
        headers += ["Workspace", "Project"]
        rows = [
            [*row, e.workspace_name or "Uncategorized", e.project_name or "Uncategorized"]
            for row, e in zip(rows, experiments, strict=True)
        ]
    as_json = [render.message_dict(e) for e in experiments]
    listing.show(args, headers, rows, as_json)
    return 0


async def _trials(s: client.Session, exp_id: int) -> list[v1.Trial]:
    request = v1.GetExperimentTrialsRequest(experiment_id=exp_id)
    return list((await s.call(s.stub.get_experiment_trials(request))).trials)


def _id_list(text: str) -> list[int]:
    """``"3,5"`` as ids, as Determined's `det e describe` takes them."""
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated experiment ids such as 3,5; got {text!r}"
        ) from None
    if not ids:
        raise argparse.ArgumentTypeError("no experiment id given")
    return ids


Described = tuple[v1.GetExperimentResponse, list[v1.Trial]]
# Each trial's metric reports and checkpoints, by trial id (for --metrics, --csv, --outdir).
Reported = dict[int, tuple[list[v1.MetricReport], list[v1.Checkpoint]]]


def describe(args: argparse.Namespace) -> int:
    tables = args.csv or args.outdir is not None
    reported: Reported = {}

    async def body(s: client.Session) -> list[Described]:
        out = []
        for exp_id in args.experiment_ids:
            request = v1.GetExperimentRequest(experiment_id=exp_id)
            trials = await _trials(s, exp_id)
            out.append((await s.call(s.stub.get_experiment(request)), trials))
            if args.metrics or tables:
                reported.update(await _reported(s, exp_id, trials))
        return out

    described = rpc.run(args.master, body)
    if tables:
        _describe_tables(args, described, reported)
        return 0
    entries = []
    for i, (resp, trials) in enumerate(described):
        e = rpc.present(resp.experiment, "experiment")
        best = best_trial(trials, smaller_is_better=e.smaller_is_better)
        if args.json:
            entries.append(describe_json(resp, trials, best))
            continue
        if i:
            print()
        print_described(e, trials, best, structs.python(resp.config))
        if resp.imported_trials:
            print()
            print(imported_text(resp.imported_trials))
        if args.metrics:
            print()
            head, body_rows = _workloads(trials, reported, metrics=True)
            workloads.emit("", "Workloads:", head, body_rows, as_csv=False, outdir=None)
    if args.json:
        print(render.to_json(entries))
    return 0


async def _reported(s: client.Session, exp_id: int, trials: list[v1.Trial]) -> Reported:
    ckpts = await s.call(s.stub.get_checkpoints(v1.GetCheckpointsRequest(experiment_id=exp_id)))
    out: Reported = {}
    for t in trials:
        req = v1.GetTrialMetricsRequest(trial_id=t.id)
        reports = list((await s.call(s.stub.get_trial_metrics(req))).reports)
        out[t.id] = (reports, [c for c in ckpts.checkpoints if checkpoint_info.trial_id(c) == t.id])
    return out


def _workloads(
    trials: list[v1.Trial], reported: Reported, *, metrics: bool
) -> tuple[list[str], list[list[Any]]]:
    every = [r for t in trials for r in reported.get(t.id, ([], []))[0]]
    training = workloads.scalar_names(every, "training") if metrics else []
    validation = workloads.scalar_names(every, "validation") if metrics else []
    body: list[list[Any]] = []
    for t in trials:
        reports, ckpts = reported.get(t.id, ([], []))
        body += workloads.rows(t.id, reports, ckpts, training, validation)
    return workloads.headers(training, validation), body


def _describe_tables(
    args: argparse.Namespace, described: list[Described], reported: Reported
) -> None:
    """Determined's three tables: the experiments, their trials, the trials' workloads."""
    exps = [rpc.present(resp.experiment, "experiment") for resp, _ in described]
    exp_rows = [[*render.experiment_row(e), e.archived, e.description] for e in exps]
    exp_head = [*render.EXPERIMENT_HEADERS, "Archived", "Description"]
    trials = [t for _, ts in described for t in ts]
    opts = {"as_csv": args.csv, "outdir": args.outdir}
    workloads.emit("experiments.csv", "Experiment:", exp_head, exp_rows, **opts)
    trial_rows = [render.trial_row(t) for t in trials]
    workloads.emit("trials.csv", "\nTrials:", render.TRIAL_HEADERS, trial_rows, **opts)
    head, body = _workloads(trials, reported, metrics=args.metrics)
    workloads.emit("workloads.csv", "\nWorkloads:", head, body, **opts)
    if args.outdir is not None:
        print(f"Wrote experiments.csv, trials.csv and workloads.csv to {args.outdir}")


def print_described(
    e: v1.Experiment, trials: list[v1.Trial], best: v1.Trial | None, config: dict[str, Any]
) -> None:
    goals = pareto.objectives(config)
    front = pareto.front(trials, goals) if goals else []
    headers = (*render.EXPERIMENT_HEADERS, "Searcher", "Best Metric", "Archived", "Description")
    row = render.experiment_row(e)
    row += [e.searcher_type, render.optional_number(e.best_trial_searcher_metric), e.archived]
    row.append(e.description)
    print(render.table(headers, [row]))
    print("\nTrials:")
    print(render.table(render.TRIAL_HEADERS, map(render.trial_row, trials)))
    forks = lineage_text(trials)
    if forks:
        print()
        print(forks)
    if front:
        print()
        print(pareto.front_text(front, goals))
    elif best is not None:
        print()
        print(best_trial_text(best, e.searcher_metric))


def describe_json(
    resp: v1.GetExperimentResponse, trials: list[v1.Trial], best: v1.Trial | None
) -> dict[str, Any]:
    """One experiment as `det e describe --json` prints it: Determined's shape, a list of
    ``{"experiment": {...}, ...}`` (the experiment with its filled config), plus its
    trials and the best of them."""
    experiment: dict[str, Any] = render.message_dict(rpc.present(resp.experiment, "experiment"))
    config = structs.python(resp.config) if resp.config is not None else None
    experiment["config"] = config
    out: dict[str, Any] = {
        "experiment": experiment,
        "job_summary": None if resp.job_summary is None else render.message_dict(resp.job_summary),
        "trials": [render.message_dict(t) for t in trials],
        "best_trial": None if best is None else render.message_dict(best),
        # Trials of searcher.source_experiment_id that seeded the search; never run here.
        "imported_trials": [render.message_dict(i) for i in resp.imported_trials],
    }
    goals = pareto.objectives(config or {})
    if goals:
        # A multi-objective search has no single best trial: its Pareto front, as trial ids.
        out["pareto_front"] = [t.id for t, _ in pareto.front(trials, goals)]
    return out


def imported_text(imported: list[v1.ImportedTrial]) -> str:
    """The warm start's trials: where each came from, its result, and whether the search
    used it."""
    sources = sorted({i.source_experiment_id for i in imported})
    title = f"Imported trials (from experiment {', '.join(map(str, sources))}; not run here):"
    headers = ("Source Trial", "Steps", "Best Metric", "Hyperparameters", "Note")
    rows = [
        [
            i.source_trial_id,
            i.steps_completed,
            render.optional_number(i.best_validation_metric),
            ", ".join(f"{k}={v}" for k, v in _flat(structs.python(i.hparams))),
            i.note or "used",
        ]
        for i in imported
    ]
    return f"{title}\n{render.table(headers, rows)}"


def best_trial(trials: list[v1.Trial], *, smaller_is_better: bool) -> v1.Trial | None:
    """The trial with the best validation of the searcher metric; the earliest on a tie."""
    ranked = [t for t in trials if t.best_validation_metric is not None]
    if not ranked:
        return None
    sign = 1.0 if smaller_is_better else -1.0
    return min(ranked, key=lambda t: (sign * (t.best_validation_metric or 0.0), t.id))


def lineage_text(trials: list[v1.Trial]) -> str:
    """Which trial started from which trial's checkpoint (PBT), one line a child; "" when
    no trial did."""
    lines = [
        f"  trial {t.id} <- trial {t.parent_trial_id} (checkpoint {t.warm_start_checkpoint_uuid})"
        for t in trials
        if t.parent_trial_id is not None
    ]
    if not lines:
        return ""
    return "\n".join(["Lineage (trial <- the trial whose checkpoint it started from):", *lines])


def best_trial_text(t: v1.Trial, metric: str) -> str:
    """`Best trial 7: val_loss 0.0812` and its hyperparameters, one dotted name a line."""
    name = metric or "validation metric"
    lines = [f"Best trial {t.id}: {name} {render.optional_number(t.best_validation_metric)}"]
    lines += [f"  {key}: {value}" for key, value in _flat(structs.python(t.hparams))]
    return "\n".join(lines)


def _flat(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in tree.items():
        if isinstance(value, dict):
            items += _flat(value, f"{prefix}{key}.")
        else:
            items.append((f"{prefix}{key}", value))
    return items


def show_config(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> dict[str, Any]:
        request = v1.GetExperimentRequest(experiment_id=args.experiment_id)
        return structs.python((await s.call(s.stub.get_experiment(request))).config)

    filled = rpc.run(args.master, body)
    sys.stdout.write(yaml.safe_dump(filled, sort_keys=False, default_flow_style=False))
    return 0


def list_trials(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> list[v1.Trial]:
        return await _trials(s, args.experiment_id)

    trials = listing.page(rpc.run(args.master, body), args)
    rows = [render.trial_row(t) for t in trials]
    listing.show(args, render.TRIAL_HEADERS, rows, [render.message_dict(t) for t in trials])
    return 0


def download(args: argparse.Namespace) -> int:
    """The experiment's ``--top-n`` best checkpoints by the searcher metric, each into
    ``OUTPUT_DIR/UUID`` (default ``checkpoints/UUID``), as Determined does."""
    if args.top_n < 1:
        raise errors.InvalidArgument(f"--top-n must be at least 1; got {args.top_n}")
    if (args.sort_by is None) != (args.smaller_is_better is None):
        args.parser.error("--sort-by and --smaller-is-better must be set together")

    async def body(s: client.Session) -> tuple[v1.Experiment, list[v1.Checkpoint]]:
        exp, found = await checkpoint.experiment_checkpoints(s, args.experiment_id)
        live = checkpoint.downloadable(found)
        if args.sort_by is None:
            return exp, checkpoint.ranked(live, smaller_is_better=exp.smaller_is_better)
        # By another validation metric: each trial's checkpoints by its own validations.
        scored: list[tuple[float, v1.Checkpoint]] = []
        for trial_id in sorted({checkpoint_info.trial_id(c) for c in live}):
            req = v1.GetTrialMetricsRequest(trial_id=trial_id, group="validation")
            validations = list((await s.call(s.stub.get_trial_metrics(req))).reports)
            mine = [c for c in live if checkpoint_info.trial_id(c) == trial_id]
            scored += trial.scored_by(mine, validations, args.sort_by)
        sign = 1.0 if args.smaller_is_better else -1.0
        return exp, [
            c
            for _, c in sorted(
                scored, key=lambda p: (sign * p[0], render.seconds(p[1].report_time))
            )
        ]

    exp, ranked = rpc.run(args.master, body)
    best = ranked[: args.top_n]
    if not best:
        metric = args.sort_by or exp.searcher_metric or "none configured"
        raise errors.NotFound(
            f"experiment {args.experiment_id} has no checkpoint with a validation of {metric} "
            "to download"
        )
    root = pathlib.Path(args.output_dir or "checkpoints")
    for c in best:
        checkpoint.fetch_files(c, str(root / c.uuid), quiet=args.quiet, mode=args.mode)
    return 0


def wait(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> v1.State:
        return await create.wait_for_end(s, args.experiment_id, interval=args.interval)

    return create.report_end(args.experiment_id, rpc.run(args.master, body))


def action(args: argparse.Namespace) -> int:
    method, done = _ACTIONS[args.action_name]
    request = v1.ExperimentActionRequest(experiment_id=args.experiment_id)

    async def body(s: client.Session) -> None:
        await s.call(getattr(s.stub, method)(request))

    rpc.run(args.master, body)
    print(f"{done} experiment {args.experiment_id}")
    return 0


def continue_experiment(args: argparse.Namespace) -> int:
    # Determined's request: an override config merged over the experiment's (--config-file,
    # then each --config). pydet's --max-trials is the override searcher.max_trials.
    override: dict[str, Any] = {}
    if args.config_file is not None:
        try:
            override = expconf.load_yaml(config.read_text(args.config_file))
        except expconf.InvalidConfig as e:
            raise errors.InvalidArgument(f"{args.config_file}: {'; '.join(e.errors)}") from None
    override = config.apply_overrides(override, args.config_overrides)
    if args.max_trials is not None:
        if args.max_trials < 1:
            raise errors.InvalidArgument(
                f"--max-trials: expected at least 1, got {args.max_trials}"
            )
        override = config.apply_overrides(
            override, [config.parse_override(f"searcher.max_trials={args.max_trials}")]
        )
    text = yaml.safe_dump(override) if override else ""
    request = v1.ContinueExperimentRequest(id=args.experiment_id, override_config=text)

    async def body(s: client.Session) -> int:
        await s.call(s.stub.continue_experiment(request))
        if args.max_trials is not None:
            print(f"Continued experiment {args.experiment_id} with max_trials {args.max_trials}")
        else:
            print(f"Continued experiment {args.experiment_id}", flush=True)
        if not args.follow_first_trial:
            return 0
        return await create.follow_first_trial(s, args.experiment_id)

    return rpc.run(args.master, body)


def delete(args: argparse.Namespace) -> int:
    exp_id = args.experiment_id
    if not args.yes and not render.confirmed(
        f"deleting experiment {exp_id}",
        f"Delete experiment {exp_id} with all its checkpoints, metrics and logs? This "
        "cannot be undone (`det experiment archive` hides it instead).",
    ):
        print("Not deleted.")
        return 1

    async def body(s: client.Session) -> None:
        request = v1.ExperimentActionRequest(experiment_id=exp_id)
        await s.call(s.stub.delete_experiment(request))

    rpc.run(args.master, body)
    print(f"Deleted experiment {exp_id}")
    return 0


def logs(args: argparse.Namespace) -> int:
    async def body(s: client.Session) -> None:
        trial_id = await create.first_trial(s, args.experiment_id, wait=args.follow)
        if trial_id is None:
            raise errors.NotFound(f"experiment {args.experiment_id} ended without any trial")
        await trial.print_logs(s, trial.logs_request(trial_id, args), as_json=args.json)

    rpc.run(args.master, body)
    return 0


def move(args: argparse.Namespace) -> int:
    """As Determined: ``det experiment move ID WORKSPACE PROJECT``."""

    async def body(s: client.Session) -> None:
        found = await project.by_name(s, args.workspace_name, args.project_name)
        req = v1.MoveExperimentRequest(
            experiment_id=args.experiment_id, destination_project_id=found.id
        )
        await s.call(s.stub.move_experiment(req))

    rpc.run(args.master, body)
    print(
        f"Moved experiment {args.experiment_id} to project {args.project_name!r} in workspace"
        f" {args.workspace_name!r}"
    )
    return 0


def _add_set_parser(verbs: Subparsers) -> None:
    p = verbs.add_parser(
        "set",
        help="change an experiment's name, description, priority, weight, max slots, gc policy"
        " or log retention",
    )
    what = p.add_subparsers(dest="field", metavar="FIELD", required=True)
    experiment_edits.add_setters(what)
    retention.add_gc_policy_parser(what)
    retention.add_log_retention_parser(what, "experiment")
    for name, kind, help_text in (
        ("priority", int, "scheduling priority (lower runs first)"),
        ("weight", float, "fair-share weight"),
        ("max-slots", int, "the most slots the experiment may hold at once"),
    ):
        q = what.add_parser(name, help=help_text)
        q.add_argument("experiment_id", type=int, metavar="ID")
        q.add_argument("value", type=kind, metavar="VALUE")
        q.set_defaults(func=set_resources)


def set_resources(args: argparse.Namespace) -> int:
    field = args.field.replace("-", "_")
    req = v1.SetExperimentResourcesRequest(experiment_id=args.experiment_id, **{field: args.value})

    async def body(s: client.Session) -> None:
        await s.call(s.stub.set_experiment_resources(req))

    rpc.run(args.master, body)
    print(f"Set {args.field} of experiment {args.experiment_id} to {args.value}")
    return 0
