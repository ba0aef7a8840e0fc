"""README's "Deploying on many machines" is a runbook the slow and Docker suites run; here,
without running anything: every block says where it runs, and one that does not is caught."""

from __future__ import annotations

import pytest

from tests import deploy_readme
from tests.deploy_readme import EVERY_NODE, GPU, HEAD


def test_every_block_of_the_section_says_where_it_runs() -> None:
    blocks = deploy_readme.blocks()
    plain = [(b.where, b.service, b.file is not None) for b in blocks if not b.docker]
    assert (EVERY_NODE, False, False) in plain  # install
    assert (HEAD, True, False) in plain and (GPU, True, False) in plain  # master, agents
    assert (HEAD, False, True) in plain  # the master's config file
    docker = [b for b in blocks if b.docker]
    assert {b.where for b in docker} == {HEAD, GPU}
    assert [c for b in docker for c in deploy_readme.container_names(b)] == [
        ("pydet-master", "det-master"),
        ("pydet-agent", "det-agent"),
    ]


def _with(block: str) -> str:
    text = deploy_readme.README.read_text()
    marker = "### With the Docker image"
    return text.replace(marker, block + "\n" + marker, 1)


@pytest.mark.parametrize(
    "block",
    [
        "```bash\nsystemctl enable --now det-agent\n```",
        "```bash\n# on the login node\ndet agent list\n```",
        "```ini\n# /etc/systemd/system/det-agent.service on each GPU node\n[Service]\n```",
        "```bash\n# on the head node, as a service\ndet-master\ndet-agent\n```",
    ],
)
def test_a_block_the_tests_cannot_place_is_an_error(block: str) -> None:
    with pytest.raises(AssertionError, match=r"README\.md line"):
        deploy_readme.blocks(_with(block))


def test_substitutions_replace_whole_names_only() -> None:
    table = {"/etc/pydet": "/tmp/n/etc/pydet", "head.example.org": "localhost", "8443": "1"}
    text = "https://head.example.org:8443 -v /etc/pydet:/etc/pydet:ro /etc/pydetx 18443"
    assert deploy_readme.substitute(text, table) == (
        "https://localhost:1 -v /tmp/n/etc/pydet:/tmp/n/etc/pydet:ro /etc/pydetx 18443"
    )
