"""The flags list commands share: --json/--csv and Determined's pagination."""

from __future__ import annotations

import argparse

import pytest

from pydet.cli import listing, render
from pydet.cli.__main__ import build_parser


def parsed(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    listing.add_format_flags(p)
    listing.add_pagination(p, limit=2)
    return p.parse_args(list(argv))


def test_every_page_is_shown_unless_one_is_asked_for() -> None:
    items = list(range(5))
    assert listing.page(items, parsed()) == [0, 1, 2, 3, 4]
    assert listing.page(items, parsed("--offset", "1")) == [1, 2, 3, 4]
    assert listing.page(items, parsed("--pages", "1")) == [0, 1]
    assert listing.page(items, parsed("--pages", "1", "--offset", "4", "--limit", "3")) == [4]


@pytest.mark.parametrize("argv", [["--limit", "0"], ["--offset", "-1"], ["--json", "--csv"]])
def test_bad_flags_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parsed(*argv)
    assert exit_.value.code == 2


def test_show_prints_csv_json_or_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [[1, "a,b", None]]
    listing.show(parsed("--csv"), ("ID", "Name", "End"), rows, [])
    assert capsys.readouterr().out == 'ID,Name,End\n1,"a,b",\n'
    listing.show(parsed("--json"), ("ID",), rows, [{"id": 1}])
    assert '"id": 1' in capsys.readouterr().out
    listing.show(parsed(), ("ID", "Name", "End"), rows, [])
    assert capsys.readouterr().out == render.table(("ID", "Name", "End"), rows) + "\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["e", "list", "-a", "--csv", "--limit", "5", "--pages", "1"],
        ["e", "lt", "3", "--csv", "--offset", "2"],
        ["t", "describe", "3", "--csv", "--limit", "10"],
        ["agent", "list", "--csv"],
        ["slot", "list", "--csv"],
        ["job", "list", "--csv", "--limit", "3"],
        ["checkpoint", "list", "3", "--csv"],
        ["task", "list", "--json"],
    ],
)
def test_list_commands_take_determineds_flags(argv: list[str]) -> None:
    build_parser().parse_args(argv)
