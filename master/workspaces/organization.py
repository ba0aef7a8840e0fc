"""The workspaces, their projects, where new experiments go and experiments' moves, over one
store: what the master builds once (``server``) and the façade calls."""

from __future__ import annotations

from collections.abc import Sequence

from pydet.master.store.db import Database
from pydet.master.workspaces.moves import Moves
from pydet.master.workspaces.placement import Placements
from pydet.master.workspaces.pool_bindings import PoolBindings
from pydet.master.workspaces.projects import ProjectStore
from pydet.master.workspaces.workspaces import WorkspaceStore


class Organization:
    def __init__(self, db: Database, pools: Sequence[str], default_pool: str = "default") -> None:
        self.workspaces = WorkspaceStore(db, pools)
        self.bindings = PoolBindings(db, pools, default_pool)
        self.projects = ProjectStore(db, self.workspaces)
        self.placements = Placements(self.workspaces, self.projects)
        self.moves = Moves(db, self.projects, self.placements)
