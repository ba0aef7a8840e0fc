"""The one error handler: expected failures are one line and exit 1, bugs keep a traceback."""

from __future__ import annotations

import argparse
import socket

import pytest

from determined.common import errors
from pydet.cli import experiment
from pydet.cli.__main__ import main


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize(
    "argv",
    [["e", "ls"], ["e", "describe", "1"], ["t", "logs", "1", "-f"], ["agent", "list"]],
)
def test_dead_master_is_one_clear_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{closed_port()}"
    assert main(["-m", address, *argv]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"Error: cannot reach the master at {address} (")
    assert err.count("\n") == 1
    assert "DET_MASTER" in err  # says how to point elsewhere


def test_det_master_environment_variable_is_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("DET_MASTER", address)
    assert main(["slot", "list"]) == 1
    assert f"cannot reach the master at {address}" in capsys.readouterr().err


def test_bad_master_address_is_an_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["-m", "localhost:notaport", "e", "ls"]) == 1
    assert capsys.readouterr().err.startswith("Error: bad master address 'localhost:notaport'")


def test_expected_errors_print_their_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(args: argparse.Namespace) -> int:
        raise errors.FailedPrecondition("experiment 3 is already archived")

    monkeypatch.setattr(experiment, "list_experiments", fail)
    assert main(["e", "ls"]) == 1
    assert capsys.readouterr().err == "Error: experiment 3 is already archived\n"


def test_unexpected_errors_keep_their_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def bug(args: argparse.Namespace) -> int:
        raise KeyError("a bug in pydet")

    monkeypatch.setattr(experiment, "list_experiments", bug)
    with pytest.raises(KeyError):
        main(["e", "ls"])


def test_ctrl_c_exits_130_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment, "list_experiments", interrupted)
    assert main(["e", "ls"]) == 130
    assert "Traceback" not in capsys.readouterr().err
