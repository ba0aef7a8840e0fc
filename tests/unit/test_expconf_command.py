"""The config of a command, notebook or shell (determined/common/expconf/_command.py)."""

from __future__ import annotations

import pytest

from determined.common import expconf


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800.0), ("1h30m", 5400.0), ("90s", 90.0), ("1.5h", 5400.0), ("250ms", 0.25)],
)
def test_idle_timeouts_are_read_as_go_durations(text: str, seconds: float) -> None:
    assert expconf.parse_duration(text) == pytest.approx(seconds)
    cfg = expconf.parse_command_config({"idle_timeout": text})
    assert cfg.idle_timeout == text and cfg.idle_timeout_seconds == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "30", "m", "1h 30m", "-5s", "5 s", "1d"])
def test_what_is_not_a_duration_is_not_read_as_one(bad: str) -> None:
    assert expconf.parse_duration(bad) is None


def test_a_commands_config_is_filled_and_checked_as_determined_has_it() -> None:
    cfg = expconf.parse_command_config(
        {"entrypoint": ["python3", "prep.py"], "resources": {"slots": 0}},
        {"resources": {"resource_pool": "default"}},
        entrypoint=True,
    )
    shown = cfg.to_dict()
    assert cfg.slots == 0 and shown["resources"]["slots"] == 0
    assert shown["resources"]["resource_pool"] == "default"
    assert shown["entrypoint"] == ["python3", "prep.py"]
    assert shown["notebook_idle_type"] == "kernels_or_terminals"
    # What to_dict writes reads back the same.
    assert expconf.parse_command_config(shown, entrypoint=True).to_dict() == shown
    # Notebooks and shells run their own entrypoint and take one slot unless told.
    assert expconf.parse_command_config({}).slots == 1


def test_every_problem_is_named_by_its_path() -> None:
    with pytest.raises(expconf.InvalidConfig) as e:
        expconf.parse_command_config(
            {
                "idle_timeout": 5,
                "notebook_idle_type": "never",
                "resources": {"slots": -1},
                "bind_mounts": [{"host_path": "rel", "container_path": "/x"}],
                "bogus": 1,
            },
            entrypoint=True,
        )
    problems = "\n".join(e.value.errors)
    for path in (
        "entrypoint: required",
        "idle_timeout: expected a duration",
        "notebook_idle_type:",
        "resources.slots: must be at least 0",
        "bind_mounts[0].host_path: must be an absolute path",
        "bogus: unknown key",
    ):
        assert path in problems, problems
