"""The model registry over one store: its models and their versions."""

from __future__ import annotations

from pydet.master.models.models import ModelStore
from pydet.master.models.versions import VersionStore
from pydet.master.store.db import Database
from pydet.master.workspaces.workspaces import WorkspaceStore


class Registry:
    def __init__(self, db: Database, workspaces: WorkspaceStore) -> None:
        self.models = ModelStore(db, workspaces)
        self.versions = VersionStore(db, self.models)
