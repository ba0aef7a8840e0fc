"""Command lines shared by every launcher: ``[[OVERRIDES...] --] (--trial TRIAL | SCRIPT...)``.

Two jobs live here. ``parse`` splits what the user wrote into overrides for the wrapped
launcher and the training command. ``merge_flags`` builds the wrapped launcher's flags: pydet's
values first, minus any flag the user overrides, then the user's overrides as written, so a
flag never appears twice and the user's value always wins.

Determined splits at the first ``--`` whenever there is one. pydet does so only when the
words before it are overrides (the first one is an option other than ``--trial``), so that
``SCRIPT -- ARGS`` keeps the script's own ``--``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Sequence

from determined.common.errors import InvalidArgument

HARNESS_MODULE = "determined.exec.harness"
WRAP_RANK_MODULE = "determined.launch.wrap_rank"


class UsageError(InvalidArgument):
    """The launcher's command line cannot be understood; the message says why."""


@dataclasses.dataclass(frozen=True)
class LaunchArgs:
    """A launcher's parsed command line: exactly one of ``trial`` and ``script`` is set."""

    overrides: list[str]
    trial: str | None = None
    script: list[str] | None = None

    def worker(self, python: str = "python3") -> list[str]:
        """The command each worker runs: the script, or the harness for a Trial class."""
        if self.trial is not None:
            return [python, "-m", HARNESS_MODULE, self.trial]
        assert self.script is not None
        return list(self.script)


def usage(prog: str, overrides_name: str) -> str:
    return (
        f"usage: python3 -m {prog} [[{overrides_name}...] --] (--trial TRIAL | SCRIPT...)\n"
        f"  {overrides_name}: arguments for the wrapped launcher, ending with `--`; they\n"
        "  replace pydet's values for the same flags.\n"
        "  --trial TRIAL: train a Trial class, given as module:ClassName (model_def:MyTrial).\n"
        "  SCRIPT...: the command each worker runs (python3 train.py --epochs 3)."
    )


def _is_trial_flag(word: str) -> bool:
    return word == "--trial" or word.startswith("--trial=")


def parse(argv: Sequence[str]) -> LaunchArgs:
    """Split a launcher's arguments into overrides and the training command.

    Raises:
        UsageError: no training command, ``--trial`` with extra words, or overrides not
            ended by ``--``.
    """
    args = list(argv)
    overrides: list[str] = []
    if args and args[0].startswith("-") and not _is_trial_flag(args[0]):
        if "--" not in args:
            raise UsageError(
                f"{args[0]!r} looks like an override for the wrapped launcher, but overrides "
                "must end with `--` before the training command"
            )
        split = args.index("--")
        overrides, args = args[:split], args[split + 1 :]
    if not args:
        raise UsageError("no training command: give --trial TRIAL or SCRIPT...")
    if _is_trial_flag(args[0]):
        if args[0] == "--trial":
            if len(args) < 2:
                raise UsageError("--trial needs a value, e.g. --trial model_def:MyTrial")
            trial, rest = args[1], args[2:]
        else:
            trial, rest = args[0].partition("=")[2], args[1:]
        if not trial:
            raise UsageError("--trial needs a value, e.g. --trial model_def:MyTrial")
        if rest:
            raise UsageError(f"--trial and a SCRIPT are mutually exclusive; extra words: {rest}")
        return LaunchArgs(overrides=overrides, trial=trial)
    return LaunchArgs(overrides=overrides, script=args)


@dataclasses.dataclass(frozen=True)
class Flag:
    """One of pydet's flags for a wrapped launcher.

    ``names`` lists every spelling the wrapped launcher accepts; ``value`` is ``None`` for a
    switch that takes no value.
    """

    names: tuple[str, ...]
    value: str | None = None

    def render(self) -> list[str]:
        return [self.names[0]] if self.value is None else [self.names[0], self.value]


def _spelling(word: str) -> str:
    """A flag's identity: the part before ``=``, with ``_`` and ``-`` treated alike."""
    name = word.partition("=")[0]
    return name if not name.startswith("--") else "--" + name[2:].replace("_", "-")


def given(overrides: Iterable[str], *names: str) -> bool:
    """Whether the user's overrides set any of the flags ``names`` (``--x v`` or ``--x=v``)."""
    wanted = {_spelling(n) for n in names}
    return any(w.startswith("-") and _spelling(w) in wanted for w in overrides)


def merge_flags(ours: Sequence[Flag], overrides: Sequence[str]) -> list[str]:
    """pydet's flags that the user did not override, then the user's overrides verbatim."""
    merged: list[str] = []
    for flag in ours:
        if not given(overrides, *flag.names):
            merged.extend(flag.render())
    merged.extend(overrides)
    return merged


def parse_cli(argv: Sequence[str], *, prog: str, overrides_name: str) -> LaunchArgs | int:
    """``parse`` for a launcher's ``main``: an exit status instead of an exception.

    ``-h``/``--help`` prints the usage and gives 0; a usage error prints it with the reason
    and gives 2.
    """
    if list(argv[:1]) in (["-h"], ["--help"]):
        print(usage(prog, overrides_name), flush=True)
        return 0
    try:
        return parse(argv)
    except UsageError as e:
        print(f"{usage(prog, overrides_name)}\nerror: {e.message}", file=sys.stderr, flush=True)
        return 2


def wrap_rank(rank: str, python: str = "python3") -> list[str]:
    """The ``wrap_rank`` prefix for a worker command; ``rank`` may name environment variables."""
    return [python, "-m", WRAP_RANK_MODULE, rank, "--"]
