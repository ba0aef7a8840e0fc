"""A recorded checkpoint's files, copied to this machine: what `det checkpoint download`,
`det trial download`, `det experiment download` and the SDK's ``Checkpoint.download`` do.

The files are read straight from the checkpoint storage the master recorded with the
checkpoint (a shared directory this machine sees, or S3 with this machine's credentials);
the master does not serve them. ``metadata.json`` is written beside them, as Determined does.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

from determined.common import errors

# How the master shows a secret of a checkpoint's storage (master/auth/redaction.py).
REDACTED = "********"


def download(
    uuid: str,
    storage: dict[str, Any] | str,
    dst: str | os.PathLike[str] | None = None,
    *,
    metadata: dict[str, Any] | None = None,
) -> pathlib.Path:
    """Copy checkpoint ``uuid`` from ``storage`` (its ``checkpoint_storage`` section, or a
    JSON text of one) into ``dst`` (default ``checkpoints/UUID``, created if needed) and write
    ``metadata`` there as ``metadata.json``; returns the directory.

    Raises:
        errors.FailedPrecondition: the storage is unknown, unusable here, or lacks the
            checkpoint.
    """
    from determined.core import _storage

    if isinstance(storage, str):
        storage = json.loads(storage) if storage else {}
    # The master shows secrets as REDACTED: this machine's own credentials (environment,
    # ~/.aws) are used instead.
    storage = {k: v for k, v in storage.items() if v != REDACTED}
    if not storage:
        raise errors.FailedPrecondition(
            f"checkpoint {uuid} has no recorded checkpoint storage to download from"
        )
    target = pathlib.Path(dst) if dst is not None else pathlib.Path("checkpoints", uuid)
    try:
        backend = _storage.from_config(storage, what=f"checkpoint {uuid}'s storage")
    except (ValueError, TypeError, NotImplementedError) as e:
        raise errors.FailedPrecondition(str(e)) from None
    if not backend.exists(uuid):
        raise errors.FailedPrecondition(
            f"checkpoint {uuid} is not in {backend.where} as seen from this machine; is the "
            "checkpoint storage reachable here?"
        )
    target.mkdir(parents=True, exist_ok=True)
    backend.fetch(uuid, target)
    (target / "metadata.json").write_text(
        json.dumps(metadata or {}, indent=2, sort_keys=True) + "\n"
    )
    return target
