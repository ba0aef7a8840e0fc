"""`det preview-search CONFIG`: what a hyperparameter search would run, without running it.

The config is read and validated here first (the same parser `det experiment create` uses,
`--config key=value` overrides included); the master then works out the trials
(`PreviewSearch`): for adaptive ASHA it simulates the search, so the numbers are the ones the
real search will use.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from determined.api.gen import v1
from determined.common import client, expconf
from pydet.cli import Subparsers, config, render, rpc


def add_parser(nouns: Subparsers) -> None:
    p = nouns.add_parser(
        "preview-search", help="show the trials and training lengths a search would run"
    )
    p.add_argument("config_file", metavar="CONFIG", help="experiment config (YAML)")
    config.add_override_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=preview_search)


def preview_search(args: argparse.Namespace) -> int:
    text = config.load(args.config_file, args.config_overrides)
    request = v1.PreviewSearchRequest(config=text)

    async def body(s: client.Session) -> v1.PreviewSearchResponse:
        return await s.call(s.stub.preview_search(request))

    resp = rpc.run(args.master, body)
    if args.json:
        print(render.to_json(render.message_dict(resp)))
        return 0
    searcher = expconf.load_yaml(text).get("searcher") or {}
    print("Using search configuration:")
    sys.stdout.write(_indented_yaml(searcher))
    print()
    print(f"This search will create a total of {resp.total_trials} trial(s).")
    if resp.max_concurrent_trials:
        print(f"At most {resp.max_concurrent_trials} trial(s) run at a time.")
    pruner = searcher.get("pruner") if isinstance(searcher, dict) else None
    if isinstance(pruner, dict):
        # Which trials the pruner stops depends on their results: lengths are the most.
        print(f"Its {pruner.get('type')} pruner may stop trials before their training length.")
    if isinstance(searcher, dict) and searcher.get("name") == "pbt":
        print(_pbt_rounds(resp))
    print(render.table(preview_headers(resp.unit), preview_rows(resp)))
    return 0


def _pbt_rounds(resp: v1.PreviewSearchResponse) -> str:
    """PBT's rounds in words: the entries are the replaced trials of each round, then the
    final population."""
    *replaced, final = resp.entries
    rounds = len(replaced) + 1
    per_round = final.length // rounds
    unit = f" {resp.unit}" if resp.unit else ""
    text = f"{rounds} round(s) of {per_round}{unit} for a population of {final.num_trials}"
    if replaced:
        text += (
            f"; after each round but the last, the worst {replaced[0].num_trials} trial(s) are"
            f" closed and as many start from the best trials' checkpoints"
        )
    return text + "."


def preview_headers(unit: str) -> tuple[str, str]:
    return ("Trials", f"Training Length ({unit})" if unit else "Training Length")


def preview_rows(resp: v1.PreviewSearchResponse) -> list[list[Any]]:
    return [[entry.num_trials, entry.length] for entry in resp.entries]


def _indented_yaml(value: Any) -> str:
    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False)
    return "".join(f"  {line}" for line in text.splitlines(keepends=True))
