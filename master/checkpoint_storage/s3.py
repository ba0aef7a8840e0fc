"""The master's side of checkpoints in S3: listing and deleting their objects.

When a checkpoint is deleted (by a user, with its experiment, or by the retention policy)
its record says where its files are; for an ``s3`` storage the master deletes the objects
``<prefix>/<uuid>/...`` itself, with the credentials recorded in the storage config or, when
it has none, those of the master's own environment (``AWS_ACCESS_KEY_ID``...).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from determined.common import errors
from determined.common.s3 import S3Storage

log = logging.getLogger(__name__)


async def remove_objects(config: Mapping[str, Any], uuid: str) -> None:
    """Delete checkpoint ``uuid``'s objects; a failure is logged (the record is already
    gone, and the objects can be deleted by hand), never raised."""
    await _remove(config, f"checkpoint {uuid}", lambda storage: storage.remove(uuid))


async def remove_files(config: Mapping[str, Any], uuid: str, rels: list[str]) -> None:
    """Delete some files of checkpoint ``uuid`` (its Checkpoint.remove_files); a failure is
    logged, never raised."""
    await _remove(config, f"checkpoint {uuid}", lambda storage: storage.remove_files(uuid, rels))


async def files(config: Mapping[str, Any], uuid: str) -> dict[str, int] | None:
    """Checkpoint ``uuid``'s objects (relative path to size); None if they cannot be listed."""
    try:
        storage = S3Storage(config, what="the checkpoint's storage")
        return await asyncio.to_thread(storage.files, uuid)
    except (errors.DetError, ValueError) as e:
        log.warning("could not list the objects of checkpoint %s: %s", uuid, e)
        return None


async def remove_tree(config: Mapping[str, Any], key_prefix: str) -> None:
    """Delete the objects under ``key_prefix`` (an experiment's TensorBoard files); a
    failure is logged, never raised."""
    await _remove(config, f"{key_prefix}/", lambda storage: storage.remove_tree(key_prefix))


async def _remove(config: Mapping[str, Any], what: str, remove: Callable[[S3Storage], int]) -> None:
    try:
        storage = S3Storage(config, what="the checkpoint's storage")
        count = await asyncio.to_thread(remove, storage)
    except (errors.DetError, ValueError) as e:
        log.warning("could not delete the objects of %s: %s", what, e)
        return
    log.info("deleted %d object(s) of %s from %s", count, what, storage.where)
