"""Config policies (Determined's task config policies), global and per workspace.

An admin (or, for a workspace, its owner) sets, per workload type (``EXPERIMENT``, or
``NTSC`` for notebooks, TensorBoards, shells and commands), a YAML or JSON document with two
parts:

- ``invariant_config``: a config fragment merged over every new experiment's config and
  winning over what the user wrote (``expconf.merge_defaults`` with the fragment as the
  winner, which is Determined's ``schemas.Merge(invariant, config)``); like Determined, NTSC
  policies refuse one;
- ``constraints``: ``priority_limit`` (with the priority scheduler, where a smaller number
  runs first, a workload may not ask for a priority below it) and ``resources.max_slots``
  (neither ``slots_per_trial`` nor ``max_slots`` may exceed it). A workload that breaks one
  is refused with what it asked for and the limit.

Setting policies replaces both parts of the scope. Existing workloads are not touched, but
changing an experiment's priority or max slots later is held to them too.

A workload is held to its workspace's policies under the global ones (``effective``): the
global invariant config is merged over the workspace's, and each global constraint, where
set, replaces the workspace's, as Determined's global policies take precedence.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import yaml

from determined.common import errors, expconf
from pydet.master.store.db import Database

EXPERIMENT = "EXPERIMENT"
NTSC = "NTSC"
WORKLOAD_TYPES = (EXPERIMENT, NTSC)
GLOBAL = 0  # the workspace_id of the global scope

MAX_DOCUMENT = 1 << 20  # bytes

# A config that is valid alone, for checking an invariant_config merged over it.
_PROBE = {"entrypoint": "true", "searcher": {"name": "single", "metric": "x", "max_length": 1}}

_PRIORITY_FAILED = "submitted workload failed priority constraint"
_RESOURCE_FAILED = "submitted workload failed a resource constraint"


@dataclass(frozen=True)
class Constraints:
    priority_limit: int | None = None
    max_slots: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.priority_limit is not None:
            out["priority_limit"] = self.priority_limit
        if self.max_slots is not None:
            out["resources"] = {"max_slots": self.max_slots}
        return out


@dataclass(frozen=True)
class Policies:
    invariant_config: dict[str, Any] | None = None
    constraints: Constraints | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.invariant_config is not None:
            out["invariant_config"] = self.invariant_config
        if self.constraints is not None:
            out["constraints"] = self.constraints.to_dict()
        return out


def workload_type(text: str) -> str:
    kind = text.strip().upper()
    if kind == "TASKS":  # the CLI's name for NTSC
        kind = NTSC
    if kind not in WORKLOAD_TYPES:
        raise errors.InvalidArgument(f"workload_type: expected EXPERIMENT or NTSC, got {text!r}")
    return kind


def _whole(value: Any, where: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise errors.InvalidArgument(f"{where}: expected a whole number >= {minimum}")
    return value


def _constraints(raw: Any) -> Constraints | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise errors.InvalidArgument("constraints: expected a mapping")
    unknown = sorted(set(raw) - {"priority_limit", "resources"})
    if unknown:
        raise errors.InvalidArgument(
            f"constraints.{unknown[0]}: unknown; constraints has priority_limit and "
            "resources.max_slots"
        )
    resources = raw.get("resources") or {}
    if not isinstance(resources, dict):
        raise errors.InvalidArgument("constraints.resources: expected a mapping")
    unknown = sorted(set(resources) - {"max_slots"})
    if unknown:
        raise errors.InvalidArgument(
            f"constraints.resources.{unknown[0]}: unknown; only max_slots is constrained"
        )
    return Constraints(
        priority_limit=_whole(raw.get("priority_limit"), "constraints.priority_limit", 1),
        max_slots=_whole(resources.get("max_slots"), "constraints.resources.max_slots", 0),
    )


def parse(kind: str, text: str) -> Policies:
    """The policies in ``text`` (YAML or JSON) for workload type ``kind``, checked."""
    if len(text.encode()) > MAX_DOCUMENT:
        raise errors.InvalidArgument(f"config_policies: larger than {MAX_DOCUMENT} bytes")
    try:
        raw = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as e:
        raise errors.InvalidArgument(f"config_policies: not YAML or JSON: {e}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise errors.InvalidArgument("config_policies: expected a mapping")
    unknown = sorted(set(raw) - {"invariant_config", "constraints"})
    if unknown:
        raise errors.InvalidArgument(
            f"config_policies.{unknown[0]}: unknown; the sections are invariant_config and "
            "constraints"
        )
    constraints = _constraints(raw.get("constraints"))
    invariant = raw.get("invariant_config")
    if invariant is not None and kind == NTSC:
        raise errors.InvalidArgument(
            "invariant_config: not supported for NTSC (task) policies, as in Determined; "
            "remove the section and try again"
        )
    if invariant is not None:
        _check_invariant(invariant, constraints)
    return Policies(invariant_config=invariant, constraints=constraints)


def _check_invariant(invariant: Any, constraints: Constraints | None) -> None:
    if not isinstance(invariant, dict):
        raise errors.InvalidArgument("invariant_config: expected a mapping")
    try:
        cfg = expconf.parse_experiment_config(expconf.merge_defaults(invariant, _PROBE))
    except expconf.InvalidConfig as e:
        raise errors.InvalidArgument(f"invariant_config: {'; '.join(e.errors)}") from None
    if constraints is None:
        return
    raw_resources = invariant.get("resources") or {}
    limit = constraints.priority_limit
    if "priority" in raw_resources and limit is not None and cfg.resources.priority != limit:
        raise errors.InvalidArgument(
            "invalid experiment config policy: invariant config & constraints are trying to "
            "set the priority limit"
        )
    max_slots = constraints.max_slots
    if max_slots is None:
        return
    if "max_slots" in raw_resources and cfg.resources.max_slots != max_slots:
        raise errors.InvalidArgument(
            "invalid experiment config policy: invariant config & constraints are trying to "
            "set the max slots"
        )
    if "slots_per_trial" in raw_resources and cfg.resources.slots_per_trial > max_slots:
        raise errors.InvalidArgument(
            f"invalid experiment config policy: invariant config has "
            f"{cfg.resources.slots_per_trial} slots per trial. violates constraints max slots "
            f"of {max_slots}"
        )


def check_priority(policies: Policies, priority: int | None, *, smaller_is_higher: bool) -> None:
    """Refuse a priority the constraints do not allow (none asked: nothing to check)."""
    limit = policies.constraints.priority_limit if policies.constraints else None
    if limit is None or priority is None:
        return
    within = priority >= limit if smaller_is_higher else priority <= limit
    if not within:
        raise errors.InvalidArgument(
            f"requested priority [{priority}] exceeds limit set by admin [{limit}]: "
            f"{_PRIORITY_FAILED}"
        )


def check_slots(policies: Policies, *, slots: int | None, max_slots: int | None) -> None:
    limit = policies.constraints.max_slots if policies.constraints else None
    if limit is None:
        return
    for name, asked in (("slots_per_trial", slots), ("max_slots", max_slots)):
        if asked is not None and asked > limit:
            raise errors.InvalidArgument(
                f"requested resources.{name} [{asked}] exceeds limit set by admin [{limit}]: "
                f"{_RESOURCE_FAILED}"
            )


def invariant_value(policies: Policies, *path: str) -> Any:
    """The invariant config's value at ``path`` (None when it sets none)."""
    node: Any = policies.invariant_config
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def over(top: Policies, under: Policies) -> Policies:
    """``top``'s policies taking precedence over ``under``'s (the global over a workspace's)."""
    invariant = top.invariant_config
    if invariant is None or under.invariant_config is None:
        invariant = invariant if invariant is not None else under.invariant_config
    else:
        invariant = expconf.merge_defaults(invariant, under.invariant_config)
    a, b = top.constraints, under.constraints
    if a is None or b is None:
        constraints = a if a is not None else b
    else:
        constraints = Constraints(
            priority_limit=a.priority_limit if a.priority_limit is not None else b.priority_limit,
            max_slots=a.max_slots if a.max_slots is not None else b.max_slots,
        )
    return Policies(invariant_config=invariant, constraints=constraints)


class ConfigPolicies:
    """The stored policies, one row per scope (the global one, or a workspace) and workload
    type."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def effective(self, kind: str, workspace_id: int) -> Policies:
        """What a workload of ``workspace_id`` is held to: the global policies over the
        workspace's."""
        top = await self.get(kind)
        return top if workspace_id == GLOBAL else over(top, await self.get(kind, workspace_id))

    async def _scope(self, workspace_id: int) -> int:
        if workspace_id != GLOBAL:
            row = await self._db.fetch_one(
                "SELECT id FROM workspaces WHERE id = ?", (workspace_id,)
            )
            if row is None:
                raise errors.NotFound(f"workspace {workspace_id} not found")
        return workspace_id

    async def get(self, kind: str, workspace_id: int = GLOBAL) -> Policies:
        row = await self._db.fetch_one(
            "SELECT invariant_config, constraints FROM config_policies"
            " WHERE workspace_id = ? AND workload_type = ?",
            (await self._scope(workspace_id), workload_type(kind)),
        )
        if row is None:
            return Policies()
        invariant = json.loads(row["invariant_config"]) if row["invariant_config"] else None
        constraints = _constraints(json.loads(row["constraints"])) if row["constraints"] else None
        return Policies(invariant_config=invariant, constraints=constraints)

    async def put(
        self, kind: str, text: str, *, username: str, workspace_id: int = GLOBAL
    ) -> Policies:
        kind = workload_type(kind)
        policies = parse(kind, text)
        invariant = policies.invariant_config
        constraints = policies.constraints
        async with self._db.atomic():
            scope = await self._scope(workspace_id)
            await self._db.execute(
                "DELETE FROM config_policies WHERE workspace_id = ? AND workload_type = ?",
                (scope, kind),
            )
            await self._db.execute(
                "INSERT INTO config_policies (workspace_id, workload_type, invariant_config,"
                " constraints, updated_by, updated_time) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    scope,
                    kind,
                    None if invariant is None else json.dumps(invariant),
                    None if constraints is None else json.dumps(constraints.to_dict()),
                    username,
                    time.time(),
                ),
            )
        return policies

    async def delete(self, kind: str, workspace_id: int = GLOBAL) -> None:
        await self._db.execute(
            "DELETE FROM config_policies WHERE workspace_id = ? AND workload_type = ?",
            (await self._scope(workspace_id), workload_type(kind)),
        )

    async def apply_invariant(self, config_text: str, workspace_id: int = GLOBAL) -> str:
        """An experiment's config with the invariant config (its workspace's under the
        global one) merged over it (unchanged when there is none)."""
        policies = await self.effective(EXPERIMENT, workspace_id)
        if policies.invariant_config is None:
            return config_text
        raw = expconf.load_yaml(config_text)
        merged = expconf.merge_defaults(policies.invariant_config, raw)
        return yaml.safe_dump(merged, sort_keys=False)
