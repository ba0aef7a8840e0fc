"""``python3 -m determined.exec.harness TRIAL``: train a Trial class in this worker.

``TRIAL`` is ``module:ClassName`` (``model_def:MyTrial``, ``pkg.models:MyTrial``, or a path
``models/mnist:MyTrial``), resolved against the working directory, which on a cluster is
the experiment's context directory: a ``determined.pytorch.PyTorchTrial``, or a
``determined.pytorch.deepspeed.DeepSpeedTrial`` (``determined.pytorch.deepspeed._harness``).
The launchers run it once per worker for ``--trial TRIAL``
(``determined.launch.torch_distributed --trial model_def:MyTrial``).

On a cluster the trial's hyperparameters, config and seed come from the task's environment.
Off the cluster set ``DET_HPARAMS`` (a JSON object) and, for the length to train,
``DET_EXPERIMENT_CONFIG`` (a JSON object or a config file); ``DET_TEST_MODE=1`` runs a few
batches only. See ``determined.pytorch``.

Exit status: 0 when training is done, paused (preempted) or stopped by the trial; 1 with a
one-line message for a trial that cannot be found or an environment that cannot be used; 2
for a bad command line. Errors in the trial's own code keep their traceback.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import determined as det
from determined.common import errors

if TYPE_CHECKING:
    from determined.pytorch import PyTorchTrial

PROG = "determined.exec.harness"
USAGE = f"usage: python3 -m {PROG} module:ClassName   (e.g. model_def:MyTrial)"
_SPEC = re.compile(
    r"(?P<module>[A-Za-z_][\w.]*(?:/[A-Za-z_][\w.]*)*?)(?:\.py)?:(?P<cls>[A-Za-z_]\w*)"
)


class TrialLoadError(errors.InvalidArgument):
    """The trial class cannot be loaded: a bad spec, a missing module or class, or not a
    ``PyTorchTrial``."""


def load_trial_class(spec: str, *, directory: str | None = None) -> type[PyTorchTrial]:
    """Import the ``PyTorchTrial`` (or ``pytorch.deepspeed.DeepSpeedTrial``) subclass that
    ``spec`` (``module:ClassName``) names.

    ``directory`` (default: the working directory) is put first on ``sys.path``.

    Raises:
        TrialLoadError: with a message that says what is wrong and where it looked.
    """

    match = _SPEC.fullmatch(spec.strip())
    if match is None:
        raise TrialLoadError(
            f"{spec!r} is not a trial class; give it as module:ClassName (e.g. model_def:MyTrial)"
        )
    module_name = match["module"].replace("/", ".")
    class_name = match["cls"]
    root = os.path.abspath(directory or os.getcwd())
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise TrialLoadError(
                f"cannot find the module {module_name!r} of trial {spec!r} in {root} (the "
                "module path is relative to the context directory)"
            ) from None
        raise TrialLoadError(
            f"importing {module_name!r} for trial {spec!r} failed: {e} (is a dependency "
            "missing from the image, or a startup-hook.sh step?)"
        ) from None
    bases = _trial_bases()
    found = getattr(module, class_name, None)
    if found is None:
        trials = _trial_classes(module, bases)
        hint = f"; it defines {', '.join(trials)}" if trials else ""
        raise TrialLoadError(
            f"module {module_name!r} ({getattr(module, '__file__', '?')}) has no class "
            f"{class_name!r}{hint}"
        )
    if not (isinstance(found, type) and issubclass(found, bases)):
        what = (
            f"the class {found.__name__}"
            if isinstance(found, type)
            else f"an object of type {type(found).__name__}"
        )
        raise TrialLoadError(
            f"{spec} names {what}, which is not a subclass of determined.pytorch.PyTorchTrial "
            "or determined.pytorch.deepspeed.DeepSpeedTrial"
        )
    if inspect.isabstract(found):
        missing = ", ".join(sorted(getattr(found, "__abstractmethods__", ())))
        raise TrialLoadError(f"{spec} does not implement the abstract method(s) {missing}")
    return found  # type: ignore[return-value]  # a PyTorchTrial or a DeepSpeedTrial


def _trial_bases() -> tuple[type, ...]:
    """The Trial base classes: ``DeepSpeedTrial`` only when the user's code imported it
    (importing it imports deepspeed)."""
    from determined.pytorch import PyTorchTrial

    deepspeed_api = sys.modules.get("determined.pytorch.deepspeed")
    if deepspeed_api is None:
        return (PyTorchTrial,)
    return (PyTorchTrial, deepspeed_api.DeepSpeedTrial)


def is_deepspeed_trial(trial_class: type) -> bool:
    """Whether ``trial_class`` is a ``DeepSpeedTrial`` (without importing deepspeed)."""
    deepspeed_api = sys.modules.get("determined.pytorch.deepspeed")
    return deepspeed_api is not None and issubclass(trial_class, deepspeed_api.DeepSpeedTrial)


def _trial_classes(module: Any, bases: tuple[type, ...]) -> list[str]:
    return sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, bases) and value not in bases
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; returns the exit status."""
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["-h"], ["--help"]):
        print(USAGE, flush=True)
        return 0
    if len(args) != 1:
        print(f"{USAGE}\nerror: expected one argument, got {len(args)}", file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401  # checked here for a clear message
    except ImportError:
        print(f"{PROG}: PyTorchTrial needs torch; install it in the image", file=sys.stderr)
        return 1
    from determined import pytorch

    try:
        trial_class = load_trial_class(args[0])
        if is_deepspeed_trial(trial_class):
            from determined.pytorch.deepspeed import _harness

            _harness.run_trial(trial_class)  # type: ignore[arg-type]  # a DeepSpeedTrial
            logging.getLogger(PROG).info("trial finished")
            return 0
        outcome = pytorch.run(trial_class)
    except errors.DetError as e:
        print(f"{PROG}: {e.message}", file=sys.stderr, flush=True)
        return 1
    logging.getLogger(PROG).info("trial finished: %s", outcome.value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
