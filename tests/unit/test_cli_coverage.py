"""scripts/cli_coverage.py against a small Determined-shaped CLI written here: the tree it
rebuilds from source, the matching against an argparse parser, and the refusal to guess."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_coverage", REPO / "scripts/cli_coverage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["cli_coverage"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


cov = _script()

DECLARATIVE = """
class Cmd: pass
class Arg: pass
class Group: pass
class ArgGroup: pass
class BoolOptArg: pass
"""

FILES = {
    "cli/_declarative_argparse.py": DECLARATIVE,
    "cli/__init__.py": """
        from determined.cli._util import pagination, make_args
        from determined.cli._declarative_argparse import Arg, Cmd, Group, BoolOptArg
    """,
    "cli/_util.py": """
        from determined.cli import _declarative_argparse as detparse
        CHOICES = [v for v in range(3)]

        def make_args(limit=200, reverse=False):
            if limit not in CHOICES:
                raise NotImplementedError
            res = [detparse.Arg("--limit", type=int, default=limit)]
            if reverse:
                res += [detparse.Arg("--reverse", action="store_true")]
            return res

        pagination = make_args()
        formats = {"json": detparse.Arg("--json"), "yaml": detparse.Arg("--yaml")}
    """,
    "cli/top_arg_descriptions.py": """
        from determined import cli
        deploy_cmd = cli.Cmd("d|eploy", None, "manage deployments", [])
    """,
    "cli/experiment.py": """
        from determined import cli
        from determined.cli import _util

        def id_arg(help):
            return cli.Arg("experiment_id", type=int, help=help)

        def patch(enabled):
            def inner(args):
                pass
            return inner

        args_description = [
            cli.Cmd("e|xperiment", None, "manage experiments", [
                cli.Cmd("list ls", patch(True), "list", [
                    *_util.pagination,
                    cli.Group(_util.formats["json"], _util.formats["yaml"]),
                ]),
                cli.Cmd("describe", None, "describe", [
                    id_arg("id"),
                    cli.BoolOptArg("--metrics", "--no-metrics", dest="metrics"),
                ] + cli.make_args(reverse=True)),
            ]),
        ]
    """,
    "cli/cli.py": """
        from determined import cli
        from determined.cli import experiment, top_arg_descriptions
        args_description = [
            cli.Arg("-m", "--master"),
            top_arg_descriptions.deploy_cmd,
        ]
        all_args_description = args_description + experiment.args_description
    """,
    "deploy/cli.py": """
        from determined import cli
        from determined.cli import top_arg_descriptions
        from determined.deploy.local import cli as local_cli
        top_arg_descriptions.deploy_cmd.subs = [
            cli.Arg("--no-preflight-checks", action="store_true"),
            local_cli.args_description,
            cli.Cmd("aws", None, "aws", [cli.Cmd("up", None, "up", [])]),
        ]
    """,
    "deploy/local/cli.py": """
        from determined import cli
        args_description = cli.Cmd("local", None, "local", [
            cli.Cmd("cluster-up", None, "up", [cli.Arg("--agents", type=int)]),
        ])
    """,
}


@pytest.fixture
def determined(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        path = tmp_path / "determined" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path / "determined" / "cli"


def _paths(node: object, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    out = {prefix: node}
    for child in node.children:  # type: ignore[attr-defined]  # a cov.Node
        out |= _paths(child, (*prefix, child.name))
    return out


def test_the_tree_is_rebuilt_from_source_with_aliases_helpers_and_deploy(determined: Path) -> None:
    tree = cov.load_determined(determined)
    nodes = _paths(tree)
    assert set(nodes) == {
        (),
        ("deploy",),
        ("deploy", "local"),
        ("deploy", "local", "cluster-up"),
        ("deploy", "aws"),
        ("deploy", "aws", "up"),
        ("experiment",),
        ("experiment", "list"),
        ("experiment", "describe"),
    }
    assert nodes[("experiment",)].names == ["experiment", "e"]  # type: ignore[attr-defined]
    assert nodes[("experiment", "list")].names == ["list", "ls"]  # type: ignore[attr-defined]
    assert nodes[("experiment", "list")].flags == [  # type: ignore[attr-defined]
        ("--limit",),
        ("--json",),
        ("--yaml",),
    ]
    # The positional experiment_id is not a flag; both halves of a BoolOptArg are.
    assert nodes[("experiment", "describe")].flags == [  # type: ignore[attr-defined]
        ("--metrics",),
        ("--no-metrics",),
        ("--limit",),
        ("--reverse",),
    ]
    assert nodes[()].flags == [("-m", "--master")]  # type: ignore[attr-defined]
    assert nodes[("deploy",)].flags == [("--no-preflight-checks",)]  # type: ignore[attr-defined]


def test_commands_match_by_any_alias_and_flags_by_long_name(determined: Path) -> None:
    ours = argparse.ArgumentParser(prog="det")
    ours.add_argument("--master")
    nouns = ours.add_subparsers()
    e = nouns.add_parser("e", aliases=["experiment"]).add_subparsers()
    ls = e.add_parser("ls")
    ls.add_argument("--limit")
    ls.add_argument("-j", "--json")
    nouns.add_parser("deploy")

    rows = {
        r.path: r
        for r in cov.compare(cov.load_determined(determined), cov.parser_tree(ours, ["det"]))
    }
    assert rows[("experiment", "list")].found
    assert rows[("experiment", "list")].flags == [
        (("--limit",), True),
        (("--json",), True),
        (("--yaml",), False),
    ]
    assert not rows[("experiment", "describe")].found
    assert all(not ok for _, ok in rows[("experiment", "describe")].flags)
    assert rows[()].flags == [(("-m", "--master"), True)]
    assert rows[("deploy", "aws")].excluded and rows[("deploy", "aws", "up")].excluded
    assert not rows[("deploy", "local")].excluded and not rows[("deploy", "local")].found


def test_a_declaration_it_cannot_follow_is_an_error_not_a_gap(determined: Path) -> None:
    (determined / "experiment.py").write_text(
        "from determined import cli\nargs_description = [cli.Cmd(NAME, None, 'x', [])]\n"
    )
    with pytest.raises(cov.Unsupported, match=r"experiment.py:2: a Cmd whose name"):
        cov.load_determined(determined)


def test_the_report_gives_both_totals_and_lists_what_is_left_out(
    determined: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = argparse.ArgumentParser(prog="det")
    ours.add_argument("-m", "--master")
    rows = list(cov.compare(cov.load_determined(determined), cov.parser_tree(ours, ["det"])))
    cov.report(rows, missing_only=True)
    out = capsys.readouterr().out
    assert "-- det experiment list" in out
    assert "det deploy aws (cloud deployment)" in out
    assert "commands: 0/6 = 0.0 %" in out  # deploy, local, cluster-up, experiment, list, describe
    assert "flags:    1/10 = 10.0 %" in out
