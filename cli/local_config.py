"""The master config of a `det deploy local` cluster: cluster-up's own settings for its
master (address, port, data directory), with a user's ``--master-config FILE`` merged over
them.

FILE's keys win; mappings (``security``, ``db``, ...) are merged key by key, anything else
(``resource_pools`` included) is replaced whole. The merged config is checked the way the
master will check it, before anything starts, so that a bad FILE is one line naming the
file and the field rather than a master that dies in the background.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from determined.common import errors

# Where cluster-up writes the merged config its master starts with.
MERGED_FILE = "master.yaml"


@dataclasses.dataclass(frozen=True)
class LocalMaster:
    """What cluster-up needs to know of the master it starts."""

    port: int
    data_dir: Path  # the master's own data directory
    agent_token_file: Path
    resource_pool: str  # the pool its agents join
    config_file: Path | None = None  # None: started with flags alone

    @property
    def admin_password_file(self) -> Path:
        return self.data_dir / "admin-password"


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``: mappings key by key, anything else replaced whole."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


# The settings that are file paths: relative ones are taken from where cluster-up runs (the
# master itself runs in the data directory).
_PATHS = (
    ("data_dir",),
    ("webui_dir",),
    ("db", "password_file"),
    ("security", "agent_token_file"),
    ("security", "tls", "cert"),
    ("security", "tls", "key"),
    ("checkpoint_storage", "host_path"),
)


def _absolute(settings: dict[str, Any]) -> dict[str, Any]:
    out = settings
    for keys in _PATHS:
        parent: Any = out
        for key in keys[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        value = parent.get(keys[-1]) if isinstance(parent, dict) else None
        if isinstance(value, str) and value:
            over: Any = Path(value).expanduser().absolute().as_posix()
            for key in reversed(keys):
                over = {key: over}
            out = merged(out, over)
    return out


def _invalid(path: Path, what: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(f"--master-config {path}: {what}")


def read(path: Path) -> dict[str, Any]:
    """FILE as a mapping, or an error naming it and what is wrong."""
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as e:
        raise _invalid(path, f"cannot read it ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise _invalid(path, f"not valid YAML ({' '.join(str(e).split())})") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        kind = type(loaded).__name__
        raise _invalid(path, f"expected a mapping of master settings, not a {kind}")
    return loaded


def prepare(
    user_file: Path | None,
    *,
    port: int,
    host: str,
    data_dir: Path,
    settings: dict[str, Any] | None = None,
) -> LocalMaster:
    """The master cluster-up starts: with flags alone, or (given ``user_file`` or
    ``settings`` of its own) with the merged config written to DATA_DIR/master.yaml and
    checked."""
    master_dir = data_dir / "master"
    if user_file is None and settings is None:
        (data_dir / MERGED_FILE).unlink(missing_ok=True)
        return LocalMaster(port, master_dir, master_dir / "agent-token", "default")
    defaults = merged({"host": host, "port": port, "data_dir": str(master_dir)}, settings or {})
    over = read(user_file) if user_file is not None else {}
    settings = _absolute(merged(defaults, over))
    data_dir.mkdir(parents=True, exist_ok=True)
    out = data_dir / MERGED_FILE
    out.write_text(yaml.safe_dump(settings, sort_keys=False))
    facts = _checked(out, user_file or out)
    return LocalMaster(
        int(facts["port"]),
        Path(facts["data_dir"]),
        Path(facts["agent_token_path"]),
        str(facts["default_resource_pool"]),
        config_file=out,
    )


def recorded(data_dir: Path) -> LocalMaster:
    """The master of the cluster in ``data_dir`` as it was last started (its merged config
    file, if it had one), for the commands that act on a part of it."""
    config_file = data_dir / MERGED_FILE
    if not config_file.is_file():
        master_dir = data_dir / "master"
        return LocalMaster(8080, master_dir, master_dir / "agent-token", "default")
    facts = _checked(config_file, config_file, keep=True)
    return LocalMaster(
        int(facts["port"]),
        Path(facts["data_dir"]),
        Path(facts["agent_token_path"]),
        str(facts["default_resource_pool"]),
        config_file=config_file,
    )


def _checked(config_file: Path, user_file: Path, *, keep: bool = False) -> dict[str, Any]:
    """The master's own check of the merged config (``det-master --check-config``, run as a
    process: the CLI never imports the master), or the error it names."""
    argv = [sys.executable, "-P", "-m", "pydet.master", "--config-file", str(config_file)]
    done = subprocess.run([*argv, "--check-config"], capture_output=True, text=True)
    if done.returncode != 0:
        if not keep:
            config_file.unlink(missing_ok=True)
        lines = done.stderr.strip().splitlines() or [f"det-master exited {done.returncode}"]
        message = lines[-1].removeprefix("det-master: ").removeprefix("master config: ")
        raise _invalid(user_file, message)
    facts: dict[str, Any] = json.loads(done.stdout)
    return facts


def write_secret(path: Path, text: str) -> None:
    """Replace a file that only its owner may read (0600 from its first byte)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text + "\n")
    tmp.replace(path)
