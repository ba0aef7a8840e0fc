"""Running an entrypoint's Python script in a fork of the launcher, not a new interpreter.

``python3 train.py`` costs a trial a new interpreter, ``import determined`` and the Core API's
imports, while the launcher that starts it has all of them loaded. So when the entrypoint is
plainly that command (this interpreter, then a script file, then plain words that a shell
would pass on unchanged), the launcher forks and the copy runs the script as ``python3``
would: as a fresh ``__main__`` module, with a script run's ``sys.argv``, ``sys.path[0]`` and
``__file__``, the default signal handlers, logging unconfigured, and the interpreter's
shutdown at its end (threads joined, ``atexit`` hooks, the script's globals and garbage
finalized, files flushed). The trial still runs
in a process of its own, which starts from the launcher's state after its imports, before
anyone's code ran. Anything else (a shell pipeline, ``-m`` or other interpreter options,
another interpreter, variables set on the command line) starts as a command, as before;
``PYDET_FORK_SCRIPTS=0`` in the experiment's environment turns forking off.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import gc
import importlib
import importlib.machinery
import io
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import traceback
import types
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

FORK_ENV = "PYDET_FORK_SCRIPTS"
# A command a shell passes on word for word: no quotes, variables, globs, redirections,
# pipes, separators or assignments, so splitting on whitespace is what sh would do.
_PLAIN = re.compile(r"[\w./,:@%+-]+(?:[ \t]+[\w./,:@%+=-]+)*")


def preload() -> None:
    """Import what a Core API script imports, so that forked scripts find it loaded."""
    import concurrent.futures.thread  # noqa: F401  # the session's call pool; imported lazily
    import encodings.idna  # noqa: F401  # the first connection to a host name's codec

    import determined.core  # noqa: F401
    from determined.api import lite
    from determined.core import _metrics, _rpc, _session  # noqa: F401

    lite.make_all()
    # Found by writing a file in each candidate directory: once here, not in every trial
    # (a task whose TMPDIR differs starts from scratch: agent/process_runtime.py).
    tempfile.gettempdir()


def forkable(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> tuple[str, list[str]]:
    """The script and its arguments if ``argv`` (an entrypoint's command) only runs a Python
    script with this interpreter, and forking it is safe here; else ``("", [])``."""
    if env.get(FORK_ENV, "1") == "0" or threading.active_count() != 1:
        return "", []
    words = list(argv)
    if len(words) == 3 and words[:2] == ["sh", "-c"]:
        text = words[2].strip()
        words = text.split() if _PLAIN.fullmatch(text) else []
    if len(words) < 2 or not _is_this_python(words[0], env):
        return "", []
    script = words[1]
    if script.startswith("-") or not os.path.isfile(os.path.join(cwd, script)):
        return "", []
    return script, words[2:]


def _is_this_python(name: str, env: Mapping[str, str]) -> bool:
    found = shutil.which(name, path=env.get("PATH", os.defpath)) if os.sep not in name else name
    if not found or not sys.executable:
        return False
    # The same interpreter binary in the same directory: the same environment (a venv's
    # python3 is the system's binary, told apart only by where it lies).
    same_dir = os.path.dirname(os.path.abspath(found)) == os.path.dirname(sys.executable)
    with contextlib.suppress(OSError):
        return same_dir and os.path.samefile(found, sys.executable)
    return False


def run(script: str, args: Sequence[str]) -> NoReturn:
    """In the forked copy: run ``script`` as ``python3 script args...`` would, then end the
    process with the exit status ``python3`` would give (the script's ``SystemExit``, or 1
    after printing an uncaught exception's traceback)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    # As the launcher starts commands: with PYTHONUNBUFFERED (its output is the task's log).
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(line_buffering=False, write_through=True)  # type: ignore[union-attr]
    path = os.path.abspath(script)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=path,
        __builtins__=builtins,
        __loader__=importlib.machinery.SourceFileLoader("__main__", path),
        __spec__=None,
        __package__=None,
    )
    sys.modules["__main__"] = main
    importlib.invalidate_caches()  # the startup hook may have installed packages
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException as e:
        tb = _from_script(e.__traceback__, path)
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        status = 130 if isinstance(e, KeyboardInterrupt) else 1
    else:
        status = 0
    _exit(status, main)


def _exit_status(code: object) -> int:
    """The exit status of ``SystemExit(code)``, printing a message as the interpreter does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _exit(status: int, main: types.ModuleType) -> NoReturn:
    """End the process as the interpreter's shutdown would for the script, without tearing
    down what the launcher loaded before the fork.

    The interpreter's shutdown joins the threads, runs the ``atexit`` hooks, then clears
    every module and frees every object: in a fork, that last part writes to each page the
    launcher's modules share with it (copy on write), tens of milliseconds of a trial's end
    for objects that die with the process anyway. So the copy does what the script can see
    (threads joined, ``atexit`` hooks, the script's globals and garbage finalized, files that
    it left open closed and their buffers written) and then ``os._exit``.
    """
    steps: tuple[Callable[[], object], ...] = (
        threading._shutdown,  # type: ignore[attr-defined]  # what the interpreter calls first
        atexit._run_exitfuncs,
        main.__dict__.clear,  # the script's globals, as module teardown clears them
        # Before the collection: freed in a cycle, a text file may lose its buffered text
        # (its buffer can be finalized first); closed here, the layers close in order.
        _close_files,
        gc.collect,  # the child's own objects only: the launcher's were frozen before the fork
    )
    for step in steps:
        try:
            step()
        except BaseException:  # as the interpreter: report it and go on shutting down
            traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = 120  # the interpreter's status when its last flush fails
    os._exit(status)


def _close_files() -> None:
    """Close the files the script left open, as freeing them at shutdown would (their
    buffered writes reach the files), wrappers before what they wrap: text files, then other
    Python-level file classes (``gzip.GzipFile``), then binary buffers, then raw files."""
    std = {id(s) for s in (sys.stdin, sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}
    # Only objects made after the fork: the launcher's are frozen, which get_objects skips.
    # The base class is looked up in the type's MRO: isinstance() may run a proxy's code.
    files = [o for o in gc.get_objects() if _IOBASE in type(o).__mro__ and id(o) not in std]
    for f in sorted(files, key=_layer):
        with contextlib.suppress(Exception):
            if not f.closed:
                f.close()


# The C base classes every file object derives from: io's ABCs are not in their MROs.
_IOBASE: type = io.IOBase.__mro__[1]
_TEXT: type = io.TextIOWrapper.__mro__[1]
_BUFFERED: type = io.BufferedWriter.__mro__[1]


def _layer(f: object) -> int:
    mro = type(f).__mro__
    if _TEXT in mro:
        return 0
    if type(f).__module__ != "_io":
        return 1
    return 2 if _BUFFERED in mro else 3


def _from_script(tb: types.TracebackType | None, path: str) -> types.TracebackType | None:
    """The traceback from the script's first frame on, as ``python3 script`` prints it."""
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    return tb
