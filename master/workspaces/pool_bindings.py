"""Resource pools bound to workspaces (Determined's RP-workspace bindings).

A pool bound to some workspaces runs only the experiments and tasks of those workspaces; a
pool bound to none is shared by all. The master's default pool is never bound (work that
names no pool must always find one). Admins bind (``auth.rules``); anybody lists. Where new
work is submitted, ``check`` refuses a pool that is not available to its workspace.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from determined.common import errors
from pydet.master.store.db import Database


class Named(Protocol):
    """A workspace as bindings need it: its id and name (for messages)."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...


async def bound(db: Database) -> dict[str, set[int]]:
    """Each bound pool's workspaces (a shared pool has no entry)."""
    out: dict[str, set[int]] = {}
    for row in await db.fetch_all("SELECT pool_name, workspace_id FROM rp_workspace_bindings"):
        out.setdefault(row["pool_name"], set()).add(row["workspace_id"])
    return out


async def available(db: Database, pools: Iterable[str], workspace_id: int) -> list[str]:
    """The pools (of ``pools``, in their order) the workspace's work may use: those bound to
    it and the shared ones."""
    bindings = await bound(db)
    return [p for p in pools if p not in bindings or workspace_id in bindings[p]]


def _names(workspaces: Sequence[Named]) -> str:
    return ", ".join(repr(w.name) for w in workspaces)


class PoolBindings:
    def __init__(self, db: Database, pools: Sequence[str], default_pool: str) -> None:
        self._db = db
        self._pools = tuple(pools)
        self._default = default_pool

    def _existing(self, pool: str) -> str:
        if pool not in self._pools:
            raise errors.NotFound(
                f"no resource pool named {pool!r}; the pools are {', '.join(self._pools)}"
            )
        return pool

    def _bindable(self, pool: str) -> str:
        if self._existing(pool) == self._default:
            raise errors.FailedPrecondition(
                f"resource pool {pool!r} is the default pool and cannot be bound to any "
                "workspace (work that names no pool runs there)"
            )
        return pool

    # -- reads ---------------------------------------------------------------------------------

    async def workspaces_of(self, pool: str) -> list[int]:
        """The ids of the workspaces ``pool`` is bound to, ascending (none: it is shared)."""
        rows = await self._db.fetch_all(
            "SELECT workspace_id FROM rp_workspace_bindings WHERE pool_name = ?"
            " ORDER BY workspace_id",
            (self._existing(pool),),
        )
        return [r["workspace_id"] for r in rows]

    async def available_to(self, workspace_id: int) -> list[str]:
        return await available(self._db, self._pools, workspace_id)

    async def check(self, pool: str, workspace_id: int, workspace_name: str, *, field: str) -> None:
        """Refuse new work of a workspace in ``pool`` if the pool is bound elsewhere."""
        bindings = await bound(self._db)
        if pool in bindings and workspace_id not in bindings[pool]:
            raise errors.FailedPrecondition(
                f"{field}: resource pool {pool!r} is bound to other workspaces and is not "
                f"available to workspace {workspace_name!r} (det workspace list-pools "
                f"{workspace_name!r} shows the pools it may use)"
            )

    # -- changes -------------------------------------------------------------------------------

    async def bind(self, pool: str, workspaces: Sequence[Named]) -> None:
        """Bind ``pool`` to ``workspaces`` as well as those it is bound to already."""
        self._bindable(pool)
        async with self._db.atomic():
            have = set(await self.workspaces_of(pool))
            already = [w for w in workspaces if w.id in have]
            if already:
                raise errors.AlreadyExists(
                    f"resource pool {pool!r} is already bound to workspace {_names(already)}"
                )
            await self._db.execute_many(
                "INSERT INTO rp_workspace_bindings (pool_name, workspace_id) VALUES (?, ?)",
                [(pool, w.id) for w in workspaces],
            )

    async def unbind(self, pool: str, workspaces: Sequence[Named]) -> None:
        """Remove these bindings of ``pool``; every one must exist."""
        async with self._db.atomic():
            have = set(await self.workspaces_of(pool))
            missing = [w for w in workspaces if w.id not in have]
            if missing:
                raise errors.NotFound(
                    f"resource pool {pool!r} is not bound to workspace {_names(missing)}"
                )
            await self._db.execute_many(
                "DELETE FROM rp_workspace_bindings WHERE pool_name = ? AND workspace_id = ?",
                [(pool, w.id) for w in workspaces],
            )

    async def overwrite(self, pool: str, workspaces: Sequence[Named]) -> None:
        """Make ``workspaces`` the only ones ``pool`` is bound to (none: shared again)."""
        self._bindable(pool)
        async with self._db.atomic():
            await self._db.execute("DELETE FROM rp_workspace_bindings WHERE pool_name = ?", (pool,))
            await self._db.execute_many(
                "INSERT INTO rp_workspace_bindings (pool_name, workspace_id) VALUES (?, ?)",
                sorted({(pool, w.id) for w in workspaces}),
            )
