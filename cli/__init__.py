"""The `det` command-line client (console script `det` -> `pydet.cli.__main__:main`)."""

from __future__ import annotations

import argparse
from typing import TypeAlias

# What `add_subparsers()` returns; a string because argparse's class is not subscriptable
# at run time, only in typeshed.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
