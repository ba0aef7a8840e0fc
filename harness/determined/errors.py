"""Determined's ``determined.errors``: exceptions the SDK raises about checkpoints, under
the names scripts written for Determined catch."""

from __future__ import annotations


class EnterpriseOnlyError(Exception):
    """A feature of Determined's enterprise edition, which pydet does not have."""


class CheckpointNotFound(Exception):
    """A checkpoint's files are not in its checkpoint storage."""


class CheckpointStateException(Exception):
    """A checkpoint is in a state that does not allow the operation (downloading a
    deleted one)."""


class NoDirectStorageAccess(Exception):
    """This machine cannot read the checkpoint storage directly."""


class ProxiedDownloadFailed(Exception):
    """A checkpoint download through the master failed."""


class MultipleDownloadsFailed(Exception):
    """Every way of downloading a checkpoint failed."""
