"""`det cmd`: commands run as tasks on a real agent, their output streamed back and their
exit code the CLI's, listed, prioritised, killed and logged like Determined's."""

from __future__ import annotations

import base64
import json
import pathlib
import re
from typing import Any

import pytest
import yaml

from determined.common.context import pack_context
from tests.cluster import Cluster, cluster_fixture, wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from cluster_fixture(tmp_path_factory.mktemp("commands"), slots=2)


def _launched(out: str) -> tuple[str, str]:
    found = re.search(r"^Launched command \(id: ([0-9a-f-]{36}), name: (.+)\)\.$", out, re.M)
    assert found is not None, out
    return found.group(1), found.group(2)


def _commands(cluster: Cluster) -> list[dict[str, Any]]:
    return list(json.loads(cluster.det("cmd", "list", "-a", "--json").stdout))


def test_a_command_streams_its_output_and_exits_with_its_code(cluster: Cluster) -> None:
    ok = cluster.det("cmd", "run", "echo", "hello", "world")
    cmd_id, name = _launched(ok.stdout)
    assert name.startswith("Command (")
    assert ok.stdout.splitlines()[1:] == ["hello world"]

    failed = cluster.det("cmd", "run", "sh", "-c", "echo out; echo err >&2; exit 3", check=False)
    assert failed.returncode == 3
    assert failed.stdout.splitlines()[1:] == ["out"] and failed.stderr.strip() == "err"

    # Its lines stay in its log, and `det task list` forgets it once it ended.
    assert "hello world" in cluster.det("cmd", "logs", cmd_id).stdout
    assert "hello world" in cluster.det("task", "logs", cmd_id).stdout
    assert cmd_id not in cluster.det("task", "list").stdout


def test_a_command_runs_in_its_context_with_its_config(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "data").mkdir(parents=True)
    (ctx / "data" / "rows.txt").write_text("1\n2\n3\n")
    extra = tmp_path / "extra.txt"
    extra.write_text("included\n")
    config = tmp_path / "cmd.yaml"
    config.write_text(
        "description: count rows\n"
        "environment:\n  environment_variables: [GREETING=hi]\n"
        "resources: {slots: 0}\n"
    )
    out = cluster.det(
        "cmd",
        "run",
        "--config-file",
        str(config),
        "--config",
        "resources.priority=7",
        "-c",
        str(ctx),
        "-i",
        str(extra),
        "sh",
        "-c",
        'wc -l < data/rows.txt; cat extra.txt; echo "$GREETING $DET_TASK_TYPE $DET_SLOT_IDS"',
    ).stdout
    cmd_id, name = _launched(out)
    assert name == "count rows"
    assert out.splitlines()[1:] == ["3", "included", "hi COMMAND []"]
    shown = cluster.det("cmd", "config", cmd_id).stdout
    assert "description: count rows" in shown and "priority: 7" in shown and "slots: 0" in shown


def test_a_detached_command_is_listed_prioritised_and_killed(cluster: Cluster) -> None:
    cmd_id = cluster.det("cmd", "run", "-d", "sleep", "600").stdout.strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", cmd_id)
    wait_until(
        lambda: any(
            c["id"] == cmd_id and c["state"] == "STATE_RUNNING" for c in _commands(cluster)
        ),
        60,
        "the command to run",
    )
    (listed,) = [c for c in _commands(cluster) if c["id"] == cmd_id]
    assert listed["username"] == "admin" and listed["slots"] == 1
    assert cmd_id in cluster.det("cmd", "list", "-q").stdout.split()

    prefix = cmd_id[:8]
    out = cluster.det("cmd", "set", "priority", prefix, "12").stdout
    assert f"Set priority of command {cmd_id} to 12" in out
    jobs = json.loads(cluster.det("job", "list", "--json").stdout)
    (job,) = [j for j in jobs if j["job_id"] == cmd_id]
    assert job["type"] == "COMMAND" and job["priority"] == 12
    assert job["allocated_slots"] == 1 and job["name"] == listed["description"]
    # Its job takes a priority as an experiment's does; its place in the queue stays.
    cluster.det("job", "update", cmd_id, "--priority", "14")
    (job,) = [
        j for j in json.loads(cluster.det("job", "list", "--json").stdout) if j["job_id"] == cmd_id
    ]
    assert job["priority"] == 14
    refused = cluster.det("job", "update", cmd_id, "--weight", "2", check=False)
    assert (
        refused.returncode == 1 and "is a command, whose weight cannot be changed" in refused.stderr
    )
    tasks = json.loads(cluster.det("task", "list", "--json").stdout)
    (summary,) = [t for t in tasks.values() if t["task_id"] == cmd_id]
    assert summary["name"] == listed["description"] and summary["slots_needed"] == 1

    assert f"Killed command {cmd_id}" in cluster.det("cmd", "kill", cmd_id).stdout
    wait_until(lambda: cmd_id not in cluster.det("cmd", "list", "-q").stdout, 30, "the kill")
    ended = cluster.get(f"/api/v1/commands/{cmd_id}")["command"]
    assert ended["state"] == "STATE_TERMINATED" and ended["exitStatus"] == "killed"


def test_commands_name_what_is_wrong(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    proc = cluster.det("cmd", "run", check=False)
    assert proc.returncode == 1 and "name the command to run" in proc.stderr
    proc = cluster.det("cmd", "run", "--config", "resources.slotz=1", "true", check=False)
    assert proc.returncode == 1 and "resources.slotz: unknown key" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = cluster.det("cmd", "run", "--config", "resources.resource_pool=gpu", "true", check=False)
    assert proc.returncode == 1 and "no resource pool named 'gpu'" in proc.stderr
    proc = cluster.det("cmd", "run", "-c", str(tmp_path / "nowhere"), "true", check=False)
    assert proc.returncode == 1 and "not a directory" in proc.stderr
    proc = cluster.det("cmd", "run", "no-such-program-here", check=False)
    assert proc.returncode == 127 and "no-such-program-here" in proc.stderr
    for verb in (("kill",), ("logs",), ("config",), ("set", "priority")):
        args = [*verb, "no-such-id"] + (["5"] if verb[0] == "set" else [])
        proc = cluster.det("cmd", *args, check=False)
        assert proc.returncode == 1 and "command no-such-id not found" in proc.stderr, proc


def test_a_template_fills_in_a_commands_config(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    template = tmp_path / "template.yaml"
    template.write_text(
        "description: from the template\n"
        "environment:\n  environment_variables: [FROM_TEMPLATE=yes]\n"
        "resources: {priority: 30}\n"
    )
    cluster.det("template", "set", "cmd-defaults", str(template))
    out = cluster.det(
        "cmd",
        "run",
        "--template",
        "cmd-defaults",
        "--config",
        "resources.priority=12",
        "sh",
        "-c",
        "echo $FROM_TEMPLATE",
    ).stdout
    cmd_id, name = _launched(out)
    assert name == "from the template"
    assert out.splitlines()[1:] == ["yes"], out
    # The config's own settings win over the template's.
    assert "priority: 12" in cluster.det("cmd", "config", cmd_id).stdout
    proc = cluster.det("cmd", "run", "--template", "no-such-template", "true", check=False)
    assert proc.returncode == 1 and "no template named 'no-such-template'" in proc.stderr


def test_a_task_belongs_to_the_workspace_it_was_launched_into(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster.det("workspace", "create", "team-a")
    in_team = cluster.det("cmd", "run", "-d", "-w", "team-a", "sleep", "60").stdout.strip()
    elsewhere = cluster.det("cmd", "run", "-d", "sleep", "60").stdout.strip()
    team = json.loads(cluster.det("workspace", "describe", "team-a", "--json").stdout)

    def listed(*flags: str) -> dict[str, Any]:
        shown = json.loads(cluster.det("cmd", "list", "--json", *flags).stdout)
        return {c["id"]: c for c in shown}

    assert set(listed("-w", "team-a")) == {in_team}
    assert in_team not in listed("-w", "Uncategorized") and elsewhere in listed(
        "-w", "Uncategorized"
    )
    assert listed()[in_team]["workspace_id"] == team["id"]
    assert listed()[elsewhere]["workspace_id"] == 1

    # Over REST too, as Determined's clients name it (workspaceId), and listed by it there;
    # the context it carries is its working directory.
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "wait.sh").write_text("echo read from the context\nsleep 60\n")
    body = {
        # No slot: the two above hold the agent's.
        "config": {"entrypoint": ["sh", "wait.sh"], "resources": {"slots": 0}},
        "workspaceId": team["id"],
        "context": base64.b64encode(pack_context(ctx)).decode(),
    }
    with cluster.urlopen(cluster.request("/api/v1/commands", method="POST", body=body), 30) as r:
        over_rest = json.load(r)["command"]
    assert over_rest["workspaceId"] == team["id"]
    shown = cluster.get(f"/api/v1/commands?workspaceId={team['id']}")["commands"]
    assert {c["id"] for c in shown} == {in_team, over_rest["id"]}
    wait_until(
        lambda: "read from the context" in cluster.det("cmd", "logs", over_rest["id"]).stdout,
        60,
        "the command launched over REST to run its context's script",
    )

    # Determined's sort, order, offset and limit, and its users by id.
    newest = cluster.get("/api/v1/commands?sortBy=SORT_BY_START_TIME&orderBy=ORDER_BY_DESC&limit=2")
    assert [c["id"] for c in newest["commands"]] == [over_rest["id"], elsewhere]
    assert newest["pagination"] == {
        "offset": 0,
        "limit": 2,
        "startIndex": 0,
        "endIndex": 2,
        "total": 3,
    }
    (last,) = cluster.get("/api/v1/commands?offset=-1")["commands"]
    assert last["id"] == over_rest["id"]
    admin_id = cluster.get("/api/v1/me")["user"]["id"]
    assert len(cluster.get(f"/api/v1/commands?userIds={admin_id}")["commands"]) == 3
    assert cluster.get(f"/api/v1/commands?userIds={admin_id + 99}")["commands"] == []

    # Its row alone, as Determined's describe shows it.
    described = json.loads(cluster.det("command", "describe", in_team[:8], "--json").stdout)
    assert (described["id"], described["workspace_id"]) == (in_team, team["id"])
    csv = cluster.det("command", "describe", in_team, "--csv").stdout.splitlines()
    assert csv[0].startswith("ID,Owner,Description,State") and csv[1].startswith(in_team)

    # Oldest first unless asked otherwise.
    ids = cluster.det("cmd", "list", "-q").stdout.split()
    assert ids.index(in_team) < ids.index(elsewhere)
    newest = cluster.det("cmd", "list", "-q", "--sort-by", "startTime", "--order-by", "desc")
    assert newest.stdout.split() == ids[::-1]

    cluster.det("workspace", "archive", "team-a")
    refused = cluster.det("cmd", "run", "-w", "team-a", "true", check=False)
    assert refused.returncode != 0 and "team-a" in refused.stderr and "archived" in refused.stderr
    assert "Traceback" not in refused.stderr
    missing = cluster.det("notebook", "start", "-d", "-w", "no-such", check=False)
    assert missing.returncode != 0 and "no-such" in missing.stderr
    cluster.det("cmd", "kill", in_team, elsewhere, over_rest["id"])


def test_a_notebook_preview_shows_its_config_and_launches_nothing(cluster: Cluster) -> None:
    before = cluster.det("notebook", "list", "-a", "-q").stdout.split()
    out = cluster.det(
        "notebook",
        "start",
        "--preview",
        "--config",
        "description=peek",
        "--config",
        "resources.slots=0",
    ).stdout
    shown = yaml.safe_load(out)
    assert shown["description"] == "peek"
    assert shown["resources"]["slots"] == 0
    assert shown["resources"]["resource_pool"] == "default"
    assert cluster.det("notebook", "list", "-a", "-q").stdout.split() == before
    bad = cluster.det(
        "notebook", "start", "--preview", "--config", "resources.slots=-2", check=False
    )
    assert bad.returncode != 0 and "slots" in bad.stderr and "Traceback" not in bad.stderr
    # Over REST, as Determined's clients send it: the config back, no notebook made.
    body = {"config": {"description": "peek over REST"}, "preview": True}
    with cluster.urlopen(cluster.request("/api/v1/notebooks", method="POST", body=body), 30) as r:
        answered = json.load(r)
    assert answered["notebook"] is None and answered["config"]["description"] == "peek over REST"
    assert cluster.det("notebook", "list", "-a", "-q").stdout.split() == before
