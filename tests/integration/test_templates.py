"""`det template` on a real master: templates are set, listed, described and removed, and
`det experiment create --template` (or `template:` in the config) merges the config over one."""

from __future__ import annotations

import json
import pathlib
import textwrap

import pytest

from determined.experimental import client
from tests.cluster import EXAMPLES, Cluster, one_line_error
from tests.integration.test_security import as_user, clear_failure, succeeded


@pytest.mark.slow
def test_an_experiment_is_created_over_a_template_set_with_the_cli(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    fragment = tmp_path / "base.yaml"
    fragment.write_text(
        textwrap.dedent(
            """
            description: from the template
            max_restarts: 3
            resources: {slots_per_trial: 2}
            labels: [templated]
            """
        )
    )
    assert "Set template base" in cluster.det("template", "set", "base", str(fragment)).stdout
    listed = cluster.det("template", "list").stdout
    assert "base" in listed and "admin" in listed
    assert "max_restarts: 3" in cluster.det("template", "list", "-d").stdout
    described = cluster.det("template", "describe", "base").stdout
    assert "description: from the template" in described

    # The config wins where both set a value (slots_per_trial: 1, max_restarts: 0).
    config = EXAMPLES / "minimal" / "const.yaml"
    exp_id = cluster.create(config, EXAMPLES / "minimal", "--template", "base", "--paused")
    got = cluster.experiment(exp_id)["config"]
    assert got["description"] == "from the template"
    assert got["labels"] == ["templated"]
    assert got["max_restarts"] == 0
    assert got["resources"]["slots_per_trial"] == 1
    assert "template" not in got

    # A `template:` key in the config does the same; a config may leave what the template
    # sets out (here the entrypoint).
    cluster.det(
        "template",
        "set",
        "runner",
        str(_write(tmp_path, "r.yaml", "entrypoint: python3 train.py\n")),
    )
    own = _write(
        tmp_path,
        "own.yaml",
        "name: own\ntemplate: runner\nsearcher: {name: single, metric: loss, max_length: 1}\n",
    )
    exp_id = cluster.create(own, EXAMPLES / "minimal", "--paused")
    assert cluster.experiment(exp_id)["config"]["entrypoint"] == "python3 train.py"
    assert cluster.det("preview-search", str(own)).returncode == 0

    missing = cluster.det(
        "experiment",
        "create",
        str(config),
        str(EXAMPLES / "minimal"),
        "--template",
        "nope",
        check=False,
    )
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert "template: no template named 'nope'" in missing.stderr

    # The SDK's create_experiment(template=...) does the same.
    det = client.Determined(master=cluster.address, user="admin", password=cluster.admin_password)
    try:
        exp = det.create_experiment(
            str(config), str(EXAMPLES / "minimal"), template="base", activate=False
        )
        assert exp.config is not None and exp.config["description"] == "from the template"
    finally:
        det.close()

    assert "Removed template base" in cluster.det("template", "remove", "base").stdout
    gone = cluster.det("template", "describe", "base", check=False)
    assert gone.returncode == 1 and "template 'base' not found" in gone.stderr
    names = [t["name"] for t in json.loads(cluster.det("template", "list", "--json").stdout)]
    assert names == ["runner"]


@pytest.mark.slow
def test_only_a_templates_owner_or_an_admin_may_change_it(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster.det("user", "create", "alice", "--password", "alice-password")
    cluster.det("user", "create", "bob", "--password", "bob-password")
    fragment = str(_write(tmp_path, "t.yaml", "max_restarts: 2\n"))
    succeeded(as_user(cluster, "alice", "alice-password", "template", "set", "hers", fragment))
    for verb in (("set", "hers", fragment), ("remove", "hers")):
        proc = as_user(cluster, "bob", "bob-password", "template", *verb)
        clear_failure(
            proc, "only the owner of template 'hers' (alice) or a user with PERMISSION_TYPE_"
        )
    succeeded(as_user(cluster, "bob", "bob-password", "template", "describe", "hers"))
    cluster.det("template", "remove", "hers")


def _write(tmp_path: pathlib.Path, name: str, text: str) -> pathlib.Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_template_is_created_in_a_workspace_and_listed_with_it(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    fragment = tmp_path / "base.yaml"
    fragment.write_text("max_restarts: 2\n")
    cluster.det("workspace", "create", "team")
    cluster.det("template", "create", "team-base", str(fragment), "-w", "team")
    cluster.det("template", "create", "shared", str(fragment))
    rows = {
        line.split("|")[0].strip(): line.split("|")[2].strip()
        for line in cluster.det("template", "list").stdout.splitlines()[2:]
    }
    assert rows == {"shared": "Uncategorized", "team-base": "team"}
    line = one_line_error(cluster, "template", "create", "x", str(fragment), "-w", "nowhere")
    assert "workspace 'nowhere' not found" in line
    # The workspace keeps its templates: it is deleted only once they are removed.
    line = one_line_error(cluster, "workspace", "delete", "team", "--yes")
    assert "holds 1 template; remove them first" in line
    cluster.det("template", "rm", "team-base")
    cluster.det("workspace", "delete", "team", "--yes")
