"""`det ... --help` for every command the parser has (found by walking it, so a new command
is covered the day it is added): each prints its usage and exits 0, without a traceback."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Iterator

import pytest

from pydet.cli.__main__ import NOUNS, build_parser


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


PARSER = build_parser()  # one parser for all: building it is most of each test's time
COMMANDS = sorted(set(_commands(PARSER)))


def test_the_walk_finds_the_whole_tree() -> None:
    assert ("experiment", "create") in COMMANDS
    assert ("e", "set", "priority") in COMMANDS  # aliases are walked too
    assert len(COMMANDS) > 100


@pytest.mark.parametrize(("module", "names"), NOUNS, ids=[m for m, _ in NOUNS])
def test_a_command_line_loads_the_module_of_its_noun(module: str, names: tuple[str, ...]) -> None:
    # `det NOUN ...` builds only the module NOUNS names for it: that module must add exactly
    # those names, or a noun (or alias) would be missing from its own command line.
    for name in names:
        (nouns,) = [a for a in build_parser([name])._actions if a.choices is not None]
        assert isinstance(nouns.choices, dict)
        assert set(nouns.choices) == set(names), (module, name)


def test_every_noun_is_named_in_nouns() -> None:
    (nouns,) = [a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(nouns.choices) == {name for _, names in NOUNS for name in names}


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "det")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        pytest.raises(SystemExit) as exited,
    ):
        PARSER.parse_args([*path, "--help"])
    assert exited.value.code == 0, err.getvalue()
    assert out.getvalue().startswith("usage: det"), out.getvalue()
    assert "Traceback" not in out.getvalue() + err.getvalue()


# Determined 0.38's commands and flags that pydet gained later: each must be where
# Determined's users type it (a misspelt name would pass the walk above unnoticed).
DETERMINED: list[tuple[tuple[str, ...], tuple[str, ...] | str]] = [
    (("resource-pool", "bindings", "add"), ()),
    (("rp", "bindings", "remove"), ()),
    (("rp", "bindings", "replace"), ()),
    (("rp", "bindings", "list-workspaces"), ()),
    (("workspace", "list-pools"), ()),
    (
        ("task", "create"),
        "--context -c -i --include --project_id --config -f --follow --fork -p --parent "
        "--inherit_context --no_pause",
    ),
    (("task", "fork"), ("-f", "--follow", "--project_id")),
    (("task", "pause"), ()),
    (("task", "unpause"), ()),
    (("task", "kill"), ("--root",)),
    (("template", "create"), ("-w", "--workspace-name")),
    (("config-policies", "set"), ("-w", "--workspace-name")),
    (("config-policies", "describe"), ("-w", "--workspace-name")),
    (("config-policies", "delete"), ("-w", "--workspace-name")),
    (("deploy",), ("--no-preflight-checks", "--no-wait-for-master", "--image-repo-prefix")),
    (
        ("deploy", "local", "cluster-up"),
        "--det-version --db-password --no-autorestart --auto-work-dir --enterprise-edition",
    ),
    (
        ("deploy", "local", "master-up"),
        "--master-name --det-version --db-password --no-autorestart --image-repo-prefix "
        "--auto-work-dir --enterprise-edition",
    ),
    (("deploy", "local", "master-down"), ("--master-name",)),
    (
        ("deploy", "local", "agent-up"),
        ("--det-version", "--enterprise-edition", "--image-repo-prefix", "--no-autorestart"),
    ),
    (
        ("user", "link-with-agent-user"),
        ("--agent-uid", "--agent-user", "--agent-gid", "--agent-group"),
    ),
    (("workspace", "create"), ("--agent-uid", "--agent-user", "--agent-gid", "--agent-group")),
    (("workspace", "edit"), ("--agent-uid", "--agent-user", "--agent-gid", "--agent-group")),
]


@pytest.mark.parametrize(("path", "flags"), DETERMINED, ids=[" ".join(p) for p, _ in DETERMINED])
def test_determineds_commands_and_flags_are_there(
    path: tuple[str, ...], flags: tuple[str, ...] | str
) -> None:
    if isinstance(flags, str):  # a long list, as one string
        flags = tuple(flags.split())
    assert path in COMMANDS
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        PARSER.parse_args([*path, "--help"])
    # Each flag as argparse lists it in the usage or options ("-f, --follow").
    listed = set(out.getvalue().replace(",", " ").replace("[", " ").replace("]", " ").split())
    assert [f for f in flags if f not in listed] == []
