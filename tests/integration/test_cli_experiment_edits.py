"""`det experiment label add|remove`, `set name|description` and `delete-tb-files` against
a real master, as Determined's det has them."""

from __future__ import annotations

import json
import pathlib

from tests.cluster import Cluster
from tests.integration.test_experiment_life import make_context


def test_labels_name_and_description_are_set_and_seen_by_lists(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    cfg, ctx = make_context(
        tmp_path,
        "print('never runs')\n",
        "name: before\nentrypoint: python3 train.py\n"
        "searcher: {name: single, metric: x, max_length: 1}\n",
    )
    exp = cluster.create(cfg, ctx, "--paused")
    e = str(exp)
    assert "Added label 'nlp' to experiment" in cluster.det("e", "label", "add", e, "nlp").stdout
    cluster.det("e", "label", "add", e, "baseline")
    cluster.det("e", "label", "add", e, "nlp")  # already there: still once
    removed = cluster.det("e", "label", "remove", e, "baseline").stdout
    assert f"Removed label 'baseline' from experiment {exp}" in removed
    assert "Set name of experiment" in cluster.det("e", "set", "name", e, "after").stdout
    cluster.det("e", "set", "description", e, "a longer story")

    (shown,) = json.loads(cluster.det("e", "describe", e, "--json").stdout)
    assert shown["experiment"]["labels"] == ["nlp"]
    assert shown["experiment"]["name"] == "after"
    assert shown["experiment"]["description"] == "a longer story"
    labelled = json.loads(cluster.det("e", "list", "--label", "nlp", "--json").stdout)
    assert [x["id"] for x in labelled] == [exp]
    assert json.loads(cluster.det("e", "list", "--label", "baseline", "--json").stdout) == []

    deleted = cluster.det("e", "delete-tb-files", e).stdout
    assert f"Deleted the TensorBoard files of experiment {exp}" in deleted

    missing = cluster.det("e", "label", "add", "4040", "x", check=False)
    assert missing.returncode == 1 and "4040" in missing.stderr
    assert "Traceback" not in missing.stderr
