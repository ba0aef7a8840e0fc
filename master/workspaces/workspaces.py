"""Workspaces as stored: created by any user, changed, archived and deleted by their owner
(``auth.rules`` says who), listed by everybody.

A workspace may keep its own checkpoint storage and default compute and auxiliary pools,
which its experiments' configs are filled from (``placement``). One is deleted only when it
holds no experiment and no model, with its projects; the default workspace never changes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from determined.common import errors, expconf
from pydet.master.store.db import Database, Row
from pydet.master.workspaces import listing, names, pool_bindings

# Workspace (and project) 1: Determined's "Uncategorized".
DEFAULT_ID = 1

ORDER_COLUMNS = {"id": "w.id", "name": "w.name"}

_SELECT = (
    "SELECT w.*, COALESCE(u.username, '') AS username,"
    " (SELECT COUNT(*) FROM projects p WHERE p.workspace_id = w.id) AS num_projects,"
    " (SELECT COUNT(*) FROM experiments e JOIN projects p ON p.id = e.project_id"
    "  WHERE p.workspace_id = w.id) AS num_experiments"
    " FROM workspaces w LEFT JOIN users u ON u.id = w.user_id"
)


@dataclass(frozen=True)
class Workspace:
    id: int
    name: str
    # Its creator; None for the default workspace, which is the cluster's.
    user_id: int | None
    username: str
    archived: bool
    immutable: bool
    # Its own checkpoint_storage section (secrets included), if it has one.
    checkpoint_storage: dict[str, Any] | None
    default_compute_pool: str
    default_aux_pool: str
    num_projects: int
    num_experiments: int
    # The agent uid, gid, user and group its tasks run as (over their owners' own).
    agent: AgentIdentity | None = None


# An agent uid, gid, user name and group name.
AgentIdentity = tuple[int, int, str, str]
# What ``patch`` leaves alone (None clears).
KEEP = "keep"


@dataclass(frozen=True)
class WorkspaceFilter(listing.ListFilter):
    """What GetWorkspaces asks for: every filter given must match."""

    # Names containing this, any case; or exactly this one.
    name: str = ""
    exact_name: str = ""


def _workspace(row: Row) -> Workspace:
    storage = row["checkpoint_storage"]
    return Workspace(
        id=row["id"],
        name=row["name"],
        user_id=row["user_id"],
        username=row["username"] or ("admin" if row["immutable"] else ""),
        archived=bool(row["archived"]),
        immutable=bool(row["immutable"]),
        checkpoint_storage=json.loads(storage) if storage else None,
        default_compute_pool=row["default_compute_pool"],
        default_aux_pool=row["default_aux_pool"],
        num_projects=row["num_projects"],
        num_experiments=row["num_experiments"],
        agent=(
            None
            if row["agent_user"] is None
            else (row["agent_uid"], row["agent_gid"], row["agent_user"], row["agent_group"])
        ),
    )


def _storage(value: dict[str, Any] | None) -> str | None:
    """A workspace's storage as stored: checked as an experiment's would be; {} is none."""
    if not value:
        return None
    expconf.check_checkpoint_storage(value, "checkpoint_storage_config")
    return json.dumps(value)


class WorkspaceStore:
    def __init__(self, db: Database, pools: Sequence[str]) -> None:
        self._db = db
        self._pools = tuple(pools)

    async def _pool(self, field: str, pool: str, workspace_id: int = 0) -> str:
        """A default pool for the workspace (0: a new one): it exists and is bound to no
        other workspace (``pool_bindings``)."""
        if pool and pool not in self._pools:
            raise errors.InvalidArgument(
                f"{field}: no resource pool named {pool!r}; the pools are {', '.join(self._pools)}"
            )
        if pool and pool not in await pool_bindings.available(self._db, [pool], workspace_id):
            raise errors.FailedPrecondition(
                f"{field}: resource pool {pool!r} is bound to other workspaces and is not "
                "available to this one"
            )
        return pool

    # -- reads ---------------------------------------------------------------------------------

    async def get(self, workspace_id: int) -> Workspace:
        row = await self._db.fetch_one(f"{_SELECT} WHERE w.id = ?", (workspace_id,))
        if row is None:
            raise errors.NotFound(f"workspace {workspace_id} not found")
        return _workspace(row)

    async def by_name(self, name: str) -> Workspace:
        row = await self._db.fetch_one(f"{_SELECT} WHERE w.name = ?", (name,))
        if row is None:
            raise errors.NotFound(f"workspace {name!r} not found")
        return _workspace(row)

    async def select(self, f: WorkspaceFilter) -> tuple[list[Workspace], int]:
        """One page of the workspaces ``f`` selects, and how many it selects in all."""
        where, params = listing.owned("w", archived=f.archived, users=f.users, user_ids=f.user_ids)
        if f.name:
            where.append("instr(lower(w.name), lower(?)) > 0")
            params.append(f.name)
        if f.exact_name:
            where.append("w.name = ?")
            params.append(f.exact_name)
        rows, total = await listing.page(
            self._db,
            select=_SELECT,
            table="workspaces w",
            where=where,
            params=params,
            order=listing.order(ORDER_COLUMNS, f.order_by),
            descending=f.descending,
            offset=f.offset,
            limit=f.limit,
        )
        return [_workspace(r) for r in rows], total

    # -- changes -------------------------------------------------------------------------------

    async def create(
        self,
        name: str,
        *,
        user_id: int,
        checkpoint_storage: dict[str, Any] | None = None,
        default_compute_pool: str = "",
        default_aux_pool: str = "",
        agent: AgentIdentity | None = None,
    ) -> Workspace:
        names.check_name("workspace", name)
        storage = _storage(checkpoint_storage)
        compute = await self._pool("default_compute_pool", default_compute_pool)
        aux = await self._pool("default_aux_pool", default_aux_pool)
        async with self._db.atomic():
            await self._unique(name)
            workspace_id = await self._db.execute(
                "INSERT INTO workspaces (name, user_id, checkpoint_storage, default_compute_pool,"
                " default_aux_pool, created_at, agent_uid, agent_gid, agent_user, agent_group)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, user_id, storage, compute, aux, time.time(), *(agent or (None,) * 4)),
            )
        return await self.get(workspace_id)

    async def _unique(self, name: str, but: int = 0) -> None:
        row = await self._db.fetch_one(
            "SELECT id FROM workspaces WHERE name = ? AND id != ?", (name, but)
        )
        if row is not None:
            raise errors.AlreadyExists(f"a workspace named {name!r} exists (id {row['id']})")

    async def _changeable(self, workspace_id: int, what: str) -> Workspace:
        found = await self.get(workspace_id)
        if found.immutable:
            raise errors.FailedPrecondition(
                f"workspace {found.name!r} is the default workspace and cannot be {what}"
            )
        return found

    async def patch(
        self,
        workspace_id: int,
        *,
        name: str | None = None,
        checkpoint_storage: dict[str, Any] | None = None,
        default_compute_pool: str | None = None,
        default_aux_pool: str | None = None,
        agent: AgentIdentity | str | None = KEEP,
    ) -> Workspace:
        """Change what is given; ``checkpoint_storage={}`` removes the workspace's own,
        ``agent=None`` its agent user and group."""
        sets: list[str] = []
        params: list[Any] = []
        if name is not None:
            sets.append("name = ?")
            params.append(names.check_name("workspace", name))
        if checkpoint_storage is not None:
            sets.append("checkpoint_storage = ?")
            params.append(_storage(checkpoint_storage))
        if default_compute_pool is not None:
            sets.append("default_compute_pool = ?")
            params.append(
                await self._pool("default_compute_pool", default_compute_pool, workspace_id)
            )
        if agent != KEEP:
            sets.append("agent_uid = ?, agent_gid = ?, agent_user = ?, agent_group = ?")
            params.extend(agent if isinstance(agent, tuple) else (None,) * 4)
        if default_aux_pool is not None:
            sets.append("default_aux_pool = ?")
            params.append(await self._pool("default_aux_pool", default_aux_pool, workspace_id))
        async with self._db.atomic():
            current = await self._changeable(workspace_id, "changed")
            if current.archived and sets:
                raise errors.FailedPrecondition(
                    f"workspace {current.name!r} is archived and cannot be changed; "
                    "unarchive it first"
                )
            if name is not None:
                await self._unique(name, but=workspace_id)
            if sets:
                await self._db.execute(
                    f"UPDATE workspaces SET {', '.join(sets)} WHERE id = ?",
                    [*params, workspace_id],
                )
        return await self.get(workspace_id)

    async def set_archived(self, workspace_id: int, archived: bool) -> None:
        async with self._db.atomic():
            await self._changeable(workspace_id, "archived" if archived else "unarchived")
            await self._db.execute(
                "UPDATE workspaces SET archived = ? WHERE id = ?", (int(archived), workspace_id)
            )

    async def delete(self, workspace_id: int) -> None:
        """Delete an empty workspace with its projects and pool bindings; one that holds
        experiments, models or templates is refused, saying how many."""
        async with self._db.atomic():
            found = await self._changeable(workspace_id, "deleted")
            if found.num_experiments:
                raise errors.FailedPrecondition(
                    f"workspace {found.name!r} holds {found.num_experiments} experiment"
                    f"{'s' if found.num_experiments != 1 else ''}; move or delete them first"
                )
            for table, noun, what in (
                ("models", "model", "move or delete them first"),
                ("templates", "template", "remove them first (det template rm)"),
            ):
                row = await self._db.fetch_one(
                    f"SELECT COUNT(*) AS n FROM {table} WHERE workspace_id = ?", (workspace_id,)
                )
                n = row["n"] if row is not None else 0
                if n:
                    raise errors.FailedPrecondition(
                        f"workspace {found.name!r} holds {n} {noun}{'s' if n != 1 else ''}; {what}"
                    )
            await self._db.execute("DELETE FROM projects WHERE workspace_id = ?", (workspace_id,))
            await self._db.execute(
                "DELETE FROM rp_workspace_bindings WHERE workspace_id = ?", (workspace_id,)
            )
            await self._db.execute("DELETE FROM workspaces WHERE id = ?", (workspace_id,))
