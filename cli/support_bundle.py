"""`det trial support-bundle`: what someone helping with a trial needs, in one file
(Determined's det-bundle-trial-ID-TIME.tar.gz): the trial's logs, the master's log, and the
trial and its experiment as the API shows them."""

from __future__ import annotations

import argparse
import datetime
import io
import json
import pathlib
import tarfile
import time

from determined.api.gen import v1
from determined.common import client, errors
from pydet.cli import Subparsers, render, rpc


def add_parser(verbs: Subparsers) -> None:
    p = verbs.add_parser("support-bundle", help="bundle a trial's logs and the master's")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    p.add_argument(
        "-o", "--output-dir", default=None, metavar="DIR", help="where to write it (default: here)"
    )
    p.set_defaults(func=support_bundle)


async def _files(s: client.Session, trial_id: int) -> dict[str, str]:
    found = await s.call(s.stub.get_trial(v1.GetTrialRequest(trial_id=trial_id)))
    trial = rpc.present(found.trial, "trial")
    exp = await s.call(
        s.stub.get_experiment(v1.GetExperimentRequest(experiment_id=trial.experiment_id))
    )
    trial_lines = []
    async for resp in rpc.stream(s, s.stub.trial_logs(v1.TrialLogsRequest(trial_id=trial_id))):
        trial_lines += [render.log_line(line) for line in resp.logs]
    master_lines = []
    try:
        async for entry in rpc.stream(s, s.stub.master_logs(v1.MasterLogsRequest())):
            if entry.log_entry is not None:
                master_lines.append(render.master_log_line(entry.log_entry))
    except errors.PermissionDenied as e:
        master_lines.append(f"(the master's log could not be read: {e.message})")
    return {
        "trial_logs.txt": "".join(line + "\n" for line in trial_lines),
        "master_logs.txt": "".join(line + "\n" for line in master_lines),
        "api_trial_call.json": json.dumps(render.message_dict(trial), indent=2),
        "api_experiment_call.json": json.dumps(render.message_dict(exp), indent=2),
    }


def support_bundle(args: argparse.Namespace) -> int:
    out_dir = pathlib.Path(args.output_dir or ".")
    if not out_dir.is_dir():
        raise errors.InvalidArgument(f"--output-dir {out_dir}: no such directory")

    async def body(s: client.Session) -> dict[str, str]:
        return await _files(s, args.trial_id)

    files = rpc.run(args.master, body)
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    name = f"det-bundle-trial-{args.trial_id}-{stamp}"
    path = out_dir / f"{name}.tar.gz"
    with tarfile.open(path, "w:gz") as bundle:
        for filename, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{filename}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            bundle.addfile(info, io.BytesIO(data))
    print(f"bundle path: {path}")
    return 0
