"""Templates: named config fragments that an experiment's config is merged over, as in
Determined (GetTemplates, GetTemplate, PutTemplate, DeleteTemplate).

A config names its template with a top-level ``template:`` key (``det experiment create
--template NAME`` sets it); ``apply`` replaces that key with the template's settings under
the config's own, merged the way the master's defaults are (``expconf.merge_defaults``:
mappings key by key, the config's value wins elsewhere), before the config is validated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from determined.api.gen import v1
from determined.common import errors, expconf
from pydet.master.experiments import json_input
from pydet.master.store.db import Database

MAX_NAME = 128
MAX_CONFIG = 1 << 20  # bytes of JSON
MAX_TEMPLATES = 10000


# Where a template goes when it names no workspace: the default one (Uncategorized).
DEFAULT_WORKSPACE = 1
_COLUMNS = "name, config, username, workspace_id"


@dataclass(frozen=True)
class Template:
    name: str
    config: dict[str, Any]
    username: str
    workspace_id: int = DEFAULT_WORKSPACE

    def to_proto(self) -> v1.Template:
        return v1.Template(
            name=self.name,
            config=json.dumps(self.config),
            username=self.username,
            workspace_id=self.workspace_id,
        )


def _template(row: Any) -> Template:
    return Template(row["name"], json.loads(row["config"]), row["username"], row["workspace_id"])


def check_name(name: str, where: str = "template.name") -> str:
    if not name or len(name) > MAX_NAME or name != name.strip() or "\n" in name:
        raise errors.InvalidArgument(
            f"{where}: expected 1 to {MAX_NAME} characters without surrounding spaces"
        )
    return name


def parse_config(text: str) -> dict[str, Any]:
    """A template's config as sent (a JSON object)."""
    config = json_input.json_object(text, field="template.config", limit=MAX_CONFIG)
    if "template" in config:
        raise errors.InvalidArgument("template.config.template: a template cannot name another")
    return config


class Templates:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def all(self, name_contains: str = "") -> list[Template]:
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM templates WHERE instr(name, ?) > 0 ORDER BY name",
            (name_contains,),
        )
        return [_template(r) for r in rows]

    async def get(self, name: str) -> Template:
        row = await self._db.fetch_one(f"SELECT {_COLUMNS} FROM templates WHERE name = ?", (name,))
        if row is None:
            raise errors.NotFound(f"template {name!r} not found")
        return _template(row)

    async def _workspace(self, workspace_id: int) -> int:
        row = await self._db.fetch_one(
            "SELECT archived FROM workspaces WHERE id = ?", (workspace_id,)
        )
        if row is None:
            raise errors.NotFound(f"template.workspace_id: workspace {workspace_id} not found")
        if row["archived"]:
            raise errors.FailedPrecondition(
                f"template.workspace_id: workspace {workspace_id} is archived and takes no new "
                "templates"
            )
        return workspace_id

    async def owner(self, name: str) -> str | None:
        row = await self._db.fetch_one("SELECT username FROM templates WHERE name = ?", (name,))
        return None if row is None else str(row["username"])

    async def put(self, t: v1.Template, username: str, *, mode: str = "put") -> Template:
        """Create or replace the template named ``t.name``; it keeps its first owner. With
        ``mode`` "create" one that exists is an error, with "replace" one that does not. It
        goes to the workspace ``t.workspace_id`` names (0: the default one when created, where
        it was when replaced)."""
        name = check_name(t.name)
        config = parse_config(t.config)
        async with self._db.atomic():
            workspace = await self._workspace(t.workspace_id) if t.workspace_id else 0
            owner = await self.owner(name)
            if owner is None:
                if mode == "replace":
                    raise errors.NotFound(f"template {name!r} not found")
                count = await self._db.fetch_one("SELECT COUNT(*) AS n FROM templates")
                if count is not None and count["n"] >= MAX_TEMPLATES:
                    raise errors.FailedPrecondition(
                        f"the master keeps at most {MAX_TEMPLATES} templates; remove some"
                    )
                await self._db.execute(
                    "INSERT INTO templates (name, config, username, workspace_id)"
                    " VALUES (?, ?, ?, ?)",
                    (name, json.dumps(config), username, workspace or DEFAULT_WORKSPACE),
                )
            elif mode == "create":
                raise errors.AlreadyExists(
                    f"template {name!r} already exists (det template set replaces it)"
                )
            else:
                await self._db.execute(
                    "UPDATE templates SET config = ? WHERE name = ?", (json.dumps(config), name)
                )
                if workspace:
                    await self._db.execute(
                        "UPDATE templates SET workspace_id = ? WHERE name = ?", (workspace, name)
                    )
        return await self.get(name)

    async def delete(self, name: str) -> None:
        async with self._db.atomic():
            if await self.owner(name) is None:
                raise errors.NotFound(f"template {name!r} not found")
            await self._db.execute("DELETE FROM templates WHERE name = ?", (name,))

    async def apply(self, text: str) -> str:
        """The config ``text`` with its ``template:`` merged in (unchanged without one)."""
        raw = expconf.load_yaml(text)
        if "template" not in raw:
            return text
        name = raw.pop("template")
        if name is None:
            return yaml.safe_dump(raw, sort_keys=False)
        if not isinstance(name, str):
            raise errors.InvalidArgument("template: expected the name of a template")
        try:
            template = await self.get(name)
        except errors.NotFound:
            raise errors.InvalidArgument(
                f"template: no template named {name!r} (det template list shows them)"
            ) from None
        return yaml.safe_dump(expconf.merge_defaults(raw, template.config), sort_keys=False)


def named(text: str, name: str) -> str:
    """The config ``text`` naming the template ``name`` (CreateExperimentRequest.template),
    for ``Templates.apply`` to merge in; a ``template:`` of its own is overridden."""
    raw = expconf.load_yaml(text)
    raw["template"] = name
    return yaml.safe_dump(raw, sort_keys=False)
