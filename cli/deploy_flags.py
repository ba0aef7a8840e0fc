"""The flags Determined's `det deploy [local]` has for its Docker-based deploy, as far as they
mean something for pydet's deploy of local processes:

- ``--master-name``: the name of the cluster's master process (master-down stops it only by
  that name); ``--auto-work-dir``: the working directory of interactive tasks (the master's
  task_container_defaults.work_dir); ``--db-password``: the password of the master's
  PostgreSQL store (a ``db:`` of type postgres in --master-config), kept in a file only its
  owner reads; ``--no-wait-for-master``: return once the processes are started;
  ``--no-preflight-checks``: skip the port (and Docker) checks before starting;
  ``--no-autorestart``: what pydet always does (its local processes are never restarted);
  ``--det-version``: must be the installed version, which is what runs.
- ``--image-repo-prefix`` and ``--enterprise-edition`` cannot mean anything for processes
  started from the installed package: they are refused with one line, never ignored.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import determined
from determined.common import errors
from pydet.cli import local_config

# The master's name when --master-name gives none (Determined's container name).
MASTER_SUFFIX = "determined-master"


def add_top_flags(p: argparse.ArgumentParser) -> None:
    """`det deploy`'s own flags."""
    p.add_argument(
        "--no-preflight-checks",
        action="store_true",
        help="skip the checks before starting (the port is free, Docker answers)",
    )
    p.add_argument(
        "--no-wait-for-master",
        action="store_true",
        help="return once the processes are started, without waiting for the master or agents",
    )
    p.add_argument(
        "--image-repo-prefix",
        dest="deploy_image_repo_prefix",
        default=None,
        metavar="PREFIX",
        help="refused: pydet's local deploy runs processes, not master or agent images",
    )


def add_process_flags(p: argparse.ArgumentParser, *, images: bool = True) -> None:
    """--det-version, --no-autorestart, --enterprise-edition (and --image-repo-prefix) of
    the commands that start something."""
    p.add_argument(
        "--det-version",
        default=None,
        metavar="VERSION",
        help=f"the version to run: only the installed one ({determined.__version__}) can run",
    )
    p.add_argument(
        "--no-autorestart",
        action="store_true",
        help="do not restart processes that exit (pydet never does: this is the default)",
    )
    p.add_argument(
        "--enterprise-edition",
        action="store_true",
        help="refused: pydet has one edition",
    )
    if images:
        p.add_argument(
            "--image-repo-prefix",
            default=None,
            metavar="PREFIX",
            help="refused: pydet's local deploy runs processes, not master or agent images",
        )


def add_master_name_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--master-name",
        default=None,
        metavar="NAME",
        help=f"the master's name (default: CLUSTER_NAME_{MASTER_SUFFIX})",
    )


def add_master_setting_flags(p: argparse.ArgumentParser) -> None:
    """--auto-work-dir and --db-password (master-up, cluster-up)."""
    p.add_argument(
        "--auto-work-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the working directory of commands, notebooks and shells whose config names none",
    )
    p.add_argument(
        "--db-password",
        default=None,
        metavar="PASSWORD",
        help="the password of the master's PostgreSQL store (a db: section in --master-config)",
    )


def check(args: argparse.Namespace) -> None:
    """Refuse, with one line each, what cannot mean anything for local processes."""
    prefix = getattr(args, "image_repo_prefix", None) or getattr(
        args, "deploy_image_repo_prefix", None
    )
    if prefix:
        raise errors.InvalidArgument(
            "--image-repo-prefix: pydet's local deploy starts the master and agents as "
            "processes of the installed package, not from images (for tasks' image, see "
            "--default-image with --runtime docker)"
        )
    if getattr(args, "enterprise_edition", False):
        raise errors.InvalidArgument(
            "--enterprise-edition: pydet has one edition, which every deploy runs"
        )
    version = getattr(args, "det_version", None)
    if version is not None and version != determined.__version__:
        raise errors.InvalidArgument(
            f"--det-version {version}: the local deploy runs the installed pydet "
            f"({determined.__version__}); install {version} to run it"
        )
    if getattr(args, "no_wait_for_master", False) and getattr(args, "initial_user_password", None):
        raise errors.InvalidArgument(
            "--initial-user-password needs the master up to set it; leave out --no-wait-for-master"
        )


def master_name(args: argparse.Namespace) -> str:
    name = getattr(args, "master_name", None)
    if name is not None:
        if not name or "/" in name or name.strip() != name:
            raise errors.InvalidArgument(f"--master-name: {name!r} is not a name")
        return str(name)
    return f"{getattr(args, 'cluster_name', 'determined')}_{MASTER_SUFFIX}"


def master_settings(
    args: argparse.Namespace, data_dir: Path, user: dict[str, Any]
) -> dict[str, Any]:
    """What --auto-work-dir and --db-password add to the master's config (under the user's
    --master-config, ``user``)."""
    settings: dict[str, Any] = {}
    work_dir = getattr(args, "auto_work_dir", None)
    if work_dir is not None:
        work_dir = work_dir.expanduser().resolve()
        work_dir.mkdir(parents=True, exist_ok=True)
        settings["task_container_defaults"] = {"work_dir": str(work_dir)}
    password = getattr(args, "db_password", None)
    if password is not None:
        db = user.get("db")
        db = db if isinstance(db, dict) else {}
        if db.get("type") != "postgres":
            raise errors.InvalidArgument(
                "--db-password: the master keeps its store in SQLite, which has no password; "
                "give a db: section of type postgres in --master-config to use one"
            )
        if db.get("password_file"):
            raise errors.InvalidArgument(
                "--db-password: --master-config's db.password_file names the password already"
            )
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / "db-password"
        local_config.write_secret(path, password)
        settings["db"] = {"password_file": str(path)}
    return settings
