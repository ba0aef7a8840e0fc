"""Templates in the store, and how a config's ``template:`` is merged over one."""

from __future__ import annotations

import json

import pytest
import yaml

from determined.api.gen import v1
from determined.common import errors
from pydet.master.experiments.templates import Templates
from pydet.master.store.db import Database


def _put(name: str, config: dict[str, object]) -> v1.Template:
    return v1.Template(name=name, config=json.dumps(config))


async def test_a_config_is_merged_over_its_template_and_wins_where_both_set(
    store: Database,
) -> None:
    templates = Templates(store)
    await templates.put(
        _put(
            "base",
            {
                "resources": {"slots_per_trial": 2, "resource_pool": "gpu"},
                "max_restarts": 1,
                "bind_mounts": [{"host_path": "/data", "container_path": "/data"}],
                "environment": {"environment_variables": ["A=1"]},
            },
        ),
        "alice",
    )
    text = """
name: mine
template: base
resources: {slots_per_trial: 4}
bind_mounts: [{host_path: /tmp, container_path: /scratch}]
"""
    merged = yaml.safe_load(await templates.apply(text))
    assert "template" not in merged
    assert merged["name"] == "mine"
    assert merged["resources"] == {"slots_per_trial": 4, "resource_pool": "gpu"}
    assert merged["max_restarts"] == 1
    assert [m["container_path"] for m in merged["bind_mounts"]] == ["/scratch", "/data"]
    assert merged["environment"] == {"environment_variables": ["A=1"]}


async def test_a_config_without_template_is_passed_on_as_written(store: Database) -> None:
    text = "name: x  # a comment the master keeps\n"
    assert await Templates(store).apply(text) == text


async def test_unknown_or_bad_templates_are_refused_naming_the_field(store: Database) -> None:
    templates = Templates(store)
    with pytest.raises(errors.InvalidArgument, match="template: no template named 'nope'"):
        await templates.apply("template: nope\n")
    with pytest.raises(errors.InvalidArgument, match="template: expected the name"):
        await templates.apply("template: [a]\n")
    with pytest.raises(errors.InvalidArgument, match=r"template\.config: expected a JSON object"):
        await templates.put(v1.Template(name="t", config="[1]"), "alice")
    with pytest.raises(errors.InvalidArgument, match=r"template\.name"):
        await templates.put(v1.Template(name="", config="{}"), "alice")
    with pytest.raises(errors.NotFound, match="template 'gone' not found"):
        await templates.delete("gone")


async def test_a_replaced_template_keeps_its_owner_and_removal_forgets_it(
    store: Database,
) -> None:
    templates = Templates(store)
    await templates.put(_put("t", {"max_restarts": 1}), "alice")
    replaced = await templates.put(_put("t", {"max_restarts": 2}), "admin")
    assert replaced.username == "alice"
    assert (await templates.get("t")).config == {"max_restarts": 2}
    assert [t.name for t in await templates.all("t")] == ["t"]
    await templates.delete("t")
    assert await templates.all() == []


async def test_a_template_belongs_to_the_workspace_it_was_created_in(store: Database) -> None:
    templates = Templates(store)
    team = await store.execute("INSERT INTO workspaces (name, created_at) VALUES ('team', 0)")
    plain = await templates.put(_put("plain", {"max_restarts": 1}), "alice", mode="create")
    assert plain.workspace_id == 1  # Uncategorized
    owned = v1.Template(name="owned", config="{}", workspace_id=team)
    assert (await templates.put(owned, "alice", mode="create")).workspace_id == team
    # Its config changed with no workspace named, it stays where it is.
    again = await templates.put(_put("owned", {"max_restarts": 2}), "alice", mode="replace")
    assert (again.workspace_id, again.config) == (team, {"max_restarts": 2})
    assert (await templates.get("owned")).to_proto().workspace_id == team
    elsewhere = v1.Template(name="x", config="{}", workspace_id=99)
    with pytest.raises(errors.NotFound, match="workspace_id: workspace 99 not found"):
        await templates.put(elsewhere, "alice", mode="create")
    await store.execute("UPDATE workspaces SET archived = 1 WHERE id = ?", (team,))
    late = v1.Template(name="late", config="{}", workspace_id=team)
    with pytest.raises(errors.FailedPrecondition, match="is archived and takes no new"):
        await templates.put(late, "alice", mode="create")
