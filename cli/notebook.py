"""`det notebook start|list|open|logs|kill|set priority|config`: JupyterLab on the cluster,
reached through the master's proxy (Determined's command names, flags and lines).
`start --preview` prints the config as the master would fill it and launches nothing.

`start` prints Determined's ``Launched notebook (id: ID, name: NAME).``, waits until
JupyterLab answers through the proxy, prints ``Jupyter Notebook is running at: URL`` and
opens it in a browser (unless ``--no-browser``). A notebook that ends first, or does not
answer in time (it is then killed), is an error that says why.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import urllib.error
import urllib.request
import webbrowser
from typing import TYPE_CHECKING, Any

from determined.common import errors
from pydet.cli import Subparsers, ntsc

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common import client

# How long `start` waits for JupyterLab to answer before it kills the notebook.
START_TIMEOUT = 300.0
_POLL = 0.2


API = ntsc.api_for("notebook")


def add_parser(nouns: Subparsers) -> None:
    verbs = ntsc.add_noun(nouns, API, "manage notebooks")

    p = verbs.add_parser("start", help="start a new notebook")
    ntsc.add_config_flags(p, "notebook")
    p.add_argument("--no-browser", action="store_true", help="don't open it in a browser")
    p.add_argument(
        "--preview",
        action="store_true",
        help="print the config as the master would fill it, and launch nothing",
    )
    p.set_defaults(func=start)

    p = verbs.add_parser("open", help="open an existing notebook")
    p.add_argument("notebook_id", metavar="NOTEBOOK_ID")
    p.add_argument("--no-browser", action="store_true", help="only print its URL")
    p.set_defaults(func=open_notebook)
    ntsc.add_common_parsers(verbs, API)


def _answers(url: str, token: str, cert_file: str | None) -> bool:
    """Whether JupyterLab answers at ``url`` (its status, through the master's proxy)."""
    from determined.common import client

    context = client.tls_context(cert_file, alpn=("http/1.1",)) if url.startswith("https") else None
    request = urllib.request.Request(
        url + "api/status", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


async def _why_it_ended(s: client.Session, nb: v1.Notebook) -> errors.DetError:
    from determined.api.gen import v1
    from pydet.cli import render, rpc

    request = v1.TaskLogsRequest(task_id=nb.id, tail=10)
    lines = [
        render.log_line(line)
        async for response in rpc.stream(s, s.stub.task_logs(request))
        for line in response.logs
    ]
    tail = "\n".join(lines)
    return errors.DetError(
        f"notebook {nb.id} ended before JupyterLab answered ({nb.exit_status})"
        + (f"; its last lines:\n{tail}" if tail else "")
    )


async def _wait_ready(s: client.Session, nb: v1.Notebook, url: str) -> None:
    """Until JupyterLab answers through the proxy; the notebook is killed if it never does."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if ntsc.state_name(nb) == "STATE_TERMINATED":
            raise await _why_it_ended(s, nb)
        if ntsc.state_name(nb) == "STATE_RUNNING" and await asyncio.to_thread(
            _answers, url, s.token or "", s.cert_file
        ):
            return
        if time.monotonic() > deadline:
            await API.kill(s, nb.id)
            raise errors.DetError(
                f"JupyterLab did not answer within {START_TIMEOUT:.0f}s; notebook {nb.id} was "
                f"killed (see det notebook logs {nb.id})"
            )
        await asyncio.sleep(_POLL)
        nb = (await API.get(s, nb.id))[0]


def _show(args: argparse.Namespace, url: str) -> None:
    print(f"Jupyter Notebook is running at: {url}", flush=True)
    if not args.no_browser:
        webbrowser.open(url)


def start(args: argparse.Namespace) -> int:
    from determined.api.gen import v1
    from pydet.cli import rpc, tensorboard

    request = v1.LaunchNotebookRequest(
        config=ntsc.config_struct(ntsc.load_config(args)),
        template_name=args.template or "",
        context=b"" if args.preview else ntsc.context_of(args),
        preview=args.preview,
    )

    async def body(s: client.Session) -> str:
        request.workspace_id = await ntsc.workspace_id(s, args)
        launched = await s.call(s.stub.launch_notebook(request))
        if args.preview:
            import json

            from determined.common import structs

            return json.dumps(structs.python(launched.config) if launched.config else {})
        nb = rpc.present(launched.notebook, "notebook")
        if args.detach:
            return nb.id
        ntsc.launched("notebook", nb.id, nb.description)
        url = tensorboard.url_of(args.master, nb.service_address)
        await _wait_ready(s, nb, url)
        return url

    found = rpc.run(args.master, body)
    if args.preview:
        import json

        import yaml

        print(yaml.safe_dump(json.loads(found), sort_keys=False), end="")
    elif args.detach:
        print(found)
    else:
        _show(args, found)
    return 0


def open_notebook(args: argparse.Namespace) -> int:
    from pydet.cli import rpc, tensorboard

    async def body(s: client.Session) -> Any:
        return (await API.get(s, await ntsc.expand(s, API, args.notebook_id)))[0]

    nb = rpc.run(args.master, body)
    if ntsc.state_name(nb) != "STATE_RUNNING":
        raise errors.FailedPrecondition(
            f"notebook {nb.id} is {ntsc.state_name(nb)}; it must be STATE_RUNNING to open"
        )
    _show(args, tensorboard.url_of(args.master, nb.service_address))
    return 0
