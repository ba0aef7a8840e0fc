"""YAML from users is bounded: aliases cannot make a reader build (or walk) a huge structure."""

from __future__ import annotations

import argparse
import pathlib
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from determined.common.expconf import InvalidConfig, load_yaml, safe_load_yaml
from determined.common.expconf._yaml import MAX_DEPTH, MAX_NODES
from pydet.cli import config as cli_config
from pydet.master.auth import redaction

MINIMAL = "entrypoint: python3 train.py\nsearcher: {name: single, metric: x}\n"


def laughs(levels: int, width: int = 9) -> str:
    """A "billion laughs" document under ``data:``: ``width ** levels`` strings in
    a few hundred bytes."""
    lines = ["data:", "  l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"  l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return MINIMAL + "\n".join(lines) + "\n"


def cost(call: Callable[[], Any]) -> tuple[float, int, BaseException | None]:
    """Seconds taken, peak bytes allocated, and what ``call`` raised."""
    tracemalloc.start()
    started = time.monotonic()
    raised: BaseException | None = None
    try:
        call()
    except Exception as e:  # the caller looks at what was raised
        raised = e
    seconds = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak, raised


@pytest.mark.parametrize("levels", [7, 9])
def test_a_billion_laughs_is_refused_quickly_and_without_allocating(levels: int) -> None:
    seconds, peak, raised = cost(lambda: load_yaml(laughs(levels)))
    assert isinstance(raised, InvalidConfig)
    assert f"more than {MAX_NODES} values once its aliases" in str(raised)
    assert seconds < 1
    assert peak < 1_000_000


def test_the_cli_refuses_a_billion_laughs_config_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(laughs(9))
    seconds, peak, raised = cost(lambda: cli_config.load(str(path)))
    assert isinstance(raised, cli_config.ConfigFileError)
    assert "aliases (*name)" in raised.message
    assert seconds < 1
    assert peak < 1_000_000


def test_a_config_override_cannot_smuggle_a_billion_laughs() -> None:
    value = "[" + ", ".join(["&a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"] + ["*a"] * 3) + "]"
    assert cli_config.parse_override(f"data.x={value}").value[3] == list(range(1, 11))
    bomb = laughs(8).split("data:\n", 1)[1].replace("\n", ", ").replace("  ", "")
    with pytest.raises(argparse.ArgumentTypeError, match="aliases"):
        cli_config.parse_override(f"data={{{bomb.rstrip(', ')}}}")


def test_scrubbing_an_error_about_a_billion_laughs_does_not_expand_it() -> None:
    # The master scrubs secrets out of error messages about configs it refused.
    seconds, peak, raised = cost(lambda: redaction.scrubbed("bad config", laughs(9)))
    assert raised is None
    assert seconds < 1
    assert peak < 1_000_000


def test_a_few_aliases_still_work() -> None:
    text = MINIMAL + (
        "bind_mounts:\n"
        "  - &m {host_path: /data, container_path: /data}\n"
        "  - {<<: *m, container_path: /data2}\n"
        "data: {a: &v [1, 2], b: *v}\n"
    )
    loaded = load_yaml(text)
    assert loaded["bind_mounts"][1] == {"host_path": "/data", "container_path": "/data2"}
    assert loaded["data"] == {"a": [1, 2], "b": [1, 2]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &a [1, *a]", "an alias (*name) inside the value its anchor (&name) marks"),
        ("a: *nowhere", "invalid YAML at line 1, column 4: found undefined alias"),
        ("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nests more than"),
        ("a: '" + "x" * (1024 * 1024) + "'", "characters long, over the limit"),
    ],
    ids=["recursive_alias", "unknown_alias", "too_deep", "too_long"],
)
def test_yaml_that_cannot_be_read_safely_gets_a_one_line_error(text: str, message: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        safe_load_yaml(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
