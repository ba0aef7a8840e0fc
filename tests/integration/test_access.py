"""Access tokens, user groups and roles on a real master, through `det`, the Python SDK and
plain HTTP (`requests`), as scripts and CI use them: a token is a bearer token scoped to its
user until it is revoked or expires, and says which; roles given to a user or a group change
what the user may do at their next command; all of it survives a master killed with
SIGKILL; bad input is one line naming what is wrong."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from unittest import mock

import pytest
import requests

from pydet.cli import __main__ as cli
from tests.cluster import EXAMPLES, Cluster, running

NOT_LOGGED_IN = "run det user login"


@pytest.fixture
def master(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    """A master alone: nothing here runs a trial."""
    yield from running(Cluster(tmp_path), lambda c: c.start_master())


def det(
    cluster: Cluster, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`det ARGS` with ``env`` as its whole environment, run in this process (the same
    entry point as the console script, without an interpreter's start for each command)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, cluster.env if env is None else env, clear=True),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = cli.main(list(args))
    return subprocess.CompletedProcess(["det", *args], code, out.getvalue(), err.getvalue())


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc
    return proc.stdout


def one_line_error(proc: subprocess.CompletedProcess[str], *expected: str) -> str:
    """A refusal a user can read: exit 1, one line, no traceback."""
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    for text in expected:
        assert text in proc.stderr, proc.stderr
    return proc.stderr


def as_user(cluster: Cluster, user: str, password: str) -> dict[str, str]:
    return {**cluster.env, "DET_USER": user, "DET_PASS": password}


def with_token(cluster: Cluster, token: str, user: str | None = None) -> dict[str, str]:
    """A script's environment: the token, no password (DET_USER as it says), and no session
    cached (one would be used before the token, as in Determined)."""
    env = {k: v for k, v in cluster.env.items() if k not in ("DET_USER", "DET_PASS")}
    env["DET_USER_TOKEN"] = token
    env["XDG_CONFIG_HOME"] = str(cluster.root / "script-config")
    if user is not None:
        env["DET_USER"] = user
    return env


def made_token(proc: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    """The id and the token `det token create` printed."""
    lines = dict(line.split(": ", 1) for line in ok(proc).splitlines())
    return int(lines["TokenID"]), lines["Access-Token"]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def paused_experiment(cluster: Cluster, env: dict[str, str], *flags: str) -> int:
    """A paused experiment created by the user of ``env`` (with ``flags``); its id."""
    example = EXAMPLES / "minimal"
    command = ("experiment", "create", str(example / "const.yaml"), str(example), "--paused")
    created = ok(det(cluster, *command, *flags, env=env))
    return int(created.split("Created experiment ")[1].split()[0])


def restart_after_sigkill(cluster: Cluster) -> None:
    cluster.stop_master(signal.SIGKILL)
    cluster.start_master()
    cluster._token = None


def test_an_access_token_is_a_bearer_of_its_user_until_revoked_even_across_a_kill(
    master: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster = master
    url = cluster.url
    ok(det(cluster, "user", "create", "alice", "--password", "alice-password"))
    exp_id = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal", "--paused")
    token_id, token = made_token(
        det(cluster, "token", "create", "alice", "-d", "ci", "--lifespan", "1h")
    )

    # REST: Authorization: Bearer, as the token's user and no one else.
    me = requests.get(f"{url}/api/v1/me", headers=bearer(token), timeout=30)
    assert me.status_code == 200 and me.json()["user"]["username"] == "alice"
    listed = requests.get(f"{url}/api/v1/experiments", headers=bearer(token), timeout=30)
    assert listed.status_code == 200
    paused = requests.post(
        f"{url}/api/v1/experiments/{exp_id}/activate", json={}, headers=bearer(token), timeout=30
    )
    assert paused.status_code == 403 and "(admin)" in paused.json()["error"]["error"]
    theirs = requests.get(f"{url}/api/v1/tokens", headers=bearer(token), timeout=30)
    assert [t["id"] for t in theirs.json()["tokenInfo"]] == [token_id]
    # With Determined's pagination; offset and limit cut the list it counts.
    assert theirs.json()["pagination"]["total"] == 1
    past = requests.get(f"{url}/api/v1/tokens?offset=1", headers=bearer(token), timeout=30)
    assert not past.json().get("tokenInfo") and past.json()["pagination"]["total"] == 1

    # gRPC through det: DET_USER + DET_USER_TOKEN, and det token login.
    assert ok(det(cluster, "user", "whoami", env=with_token(cluster, token, "alice"))) == (
        "You are logged in as user 'alice'\n"
    )
    fresh = {**with_token(cluster, token), "XDG_CONFIG_HOME": str(tmp_path / "fresh")}
    del fresh["DET_USER_TOKEN"]
    assert ok(det(cluster, "token", "login", token, env=fresh)) == "Authenticated as alice.\n"
    assert ok(det(cluster, "user", "whoami", env=fresh)).endswith("'alice'\n")
    # The Python SDK honours DET_USER_TOKEN as Determined's does.
    sdk = subprocess.run(
        [
            sys.executable,
            "-c",
            "from determined.experimental import client; "
            "print([e.id for e in client.list_experiments()])",
        ],
        env=with_token(cluster, token, "alice"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert sdk.returncode == 0 and sdk.stdout.strip() == f"[{exp_id}]", sdk

    # Never kept in clear, never logged.
    rows = cluster.sql("SELECT * FROM access_tokens")
    assert rows and all(token not in str(v) for row in rows for v in row)
    assert token not in (cluster.root / "master.log").read_text()

    restart_after_sigkill(cluster)
    assert requests.get(f"{url}/api/v1/me", headers=bearer(token), timeout=30).status_code == 200

    ok(det(cluster, "token", "revoke", str(token_id)))
    refused = requests.get(f"{url}/api/v1/me", headers=bearer(token), timeout=30)
    assert refused.status_code == 401
    assert f"access token {token_id} was revoked at" in refused.json()["error"]["error"]
    why = f"not logged in to {cluster.address} (access token {token_id} was revoked at"
    one_line_error(det(cluster, "user", "whoami", env=with_token(cluster, token, "alice")), why)
    one_line_error(det(cluster, "experiment", "list", env=fresh), why)

    restart_after_sigkill(cluster)
    assert requests.get(f"{url}/api/v1/me", headers=bearer(token), timeout=30).status_code == 401
    shown = json.loads(ok(det(cluster, "token", "describe", str(token_id), "--json")))
    assert shown[0]["revoked"] is True and shown[0]["description"] == "ci"


def test_an_access_token_expires_and_says_when(master: Cluster) -> None:
    cluster = master
    token_id, token = made_token(det(cluster, "token", "create", "--lifespan", "3s"))
    assert ok(det(cluster, "user", "whoami", env=with_token(cluster, token))).endswith("(admin)\n")
    time.sleep(3.5)
    refused = requests.get(f"{cluster.url}/api/v1/me", headers=bearer(token), timeout=30)
    assert refused.status_code == 401
    assert f"access token {token_id} expired at" in refused.json()["error"]["error"]
    one_line_error(
        det(cluster, "experiment", "list", env=with_token(cluster, token)),
        f"(access token {token_id} expired at",
        NOT_LOGGED_IN,
    )
    # Gone from the list of working tokens; --show-inactive shows it.
    assert str(token_id) not in ok(det(cluster, "token", "list"))
    assert json.loads(ok(det(cluster, "token", "list", "-a", "--json")))[0]["id"] == token_id


def test_token_creator_lets_a_user_manage_their_own_tokens_only(master: Cluster) -> None:
    cluster = master
    for name in ("alice", "bob"):
        ok(det(cluster, "user", "create", name, "--password", f"{name}-password"))
    bob = as_user(cluster, "bob", "bob-password")
    one_line_error(det(cluster, "token", "create", env=bob), "PERMISSION_TYPE_CREATE_TOKEN")
    ok(det(cluster, "rbac", "assign-role", "-u", "bob", "TokenCreator"))
    own_id, _ = made_token(det(cluster, "token", "create", "-d", "bob's", env=bob))
    alices_id, _ = made_token(det(cluster, "token", "create", "alice"))
    one_line_error(
        det(cluster, "token", "create", "alice", env=bob), "PERMISSION_TYPE_CREATE_OTHER_TOKEN"
    )
    one_line_error(
        det(cluster, "token", "list", "alice", env=bob), "PERMISSION_TYPE_VIEW_OTHER_TOKEN"
    )
    one_line_error(
        det(cluster, "token", "revoke", str(alices_id), env=bob),
        "PERMISSION_TYPE_ADMINISTRATE_TOKEN",
    )
    assert [t["id"] for t in json.loads(ok(det(cluster, "token", "list", "--json", env=bob)))] == [
        own_id
    ]
    edited = ok(det(cluster, "token", "edit", str(own_id), "-d", "ci-bot", env=bob))
    assert edited.endswith(f"Successfully updated token with ID: {own_id}.\n")
    assert ok(det(cluster, "token", "revoke", str(own_id), env=bob)).endswith(
        f"Successfully revoked token {own_id}.\n"
    )
    listed = json.loads(ok(det(cluster, "token", "list", "--json")))
    assert [t["id"] for t in listed] == [alices_id]


def test_roles_given_to_a_user_or_a_group_decide_what_they_may_do_even_after_a_kill(
    master: Cluster,
) -> None:
    cluster = master
    for name in ("alice", "bob"):
        ok(det(cluster, "user", "create", name, "--password", f"{name}-password"))
    alice, bob = (as_user(cluster, n, f"{n}-password") for n in ("alice", "bob"))
    exp_id = paused_experiment(cluster, alice)
    steer = ("experiment", "set", "priority", str(exp_id), "7")
    refusal = f"only the owner of experiment {exp_id} (alice) or a user with"
    one_line_error(det(cluster, *steer, env=bob), refusal, "PERMISSION_TYPE_UPDATE_EXPERIMENT")
    assert ok(det(cluster, "rbac", "my-permissions", env=bob)).startswith("no permissions")

    # Editor through a group: bob steers alice's experiment at his next command.
    out = ok(det(cluster, "user-group", "create", "editors", "--add-user", "bob"))
    assert out == "user group with name editors and ID 1 created\nbob was added to the group\n"
    assert ok(det(cluster, "rbac", "assign-role", "-g", "editors", "Editor")) == (
        "assigned role 'Editor' with ID 5 to group 'editors' with ID 1 globally\n"
    )
    ok(det(cluster, *steer, env=bob))
    assert "PERMISSION_TYPE_UPDATE_EXPERIMENT" in ok(
        det(cluster, "rbac", "my-permissions", env=bob)
    )
    roles = ok(det(cluster, "rbac", "list-users-roles", "bob"))
    assert "Editor" in roles and "editors" in roles

    # ClusterAdmin to the user himself: he is an admin, as `det user list` says.
    one_line_error(
        det(cluster, "user", "create", "carol", "--password", "carol-password", env=bob),
        "PERMISSION_TYPE_ADMINISTRATE_USER",
    )
    ok(det(cluster, "rbac", "assign-role", "-u", "bob", "ClusterAdmin"))
    ok(det(cluster, "user", "create", "carol", "--password", "carol-password", env=bob))
    users = json.loads(ok(det(cluster, "user", "list", "--json")))
    assert next(u for u in users if u["username"] == "bob")["admin"] is True

    restart_after_sigkill(cluster)
    ok(det(cluster, *steer, env=bob))
    ok(det(cluster, "user", "create", "dave", "--password", "dave-password", env=bob))
    assert "role 'Editor' with ID 5 assigned" in ok(
        det(cluster, "rbac", "list-groups-roles", "editors")
    )

    ok(det(cluster, "rbac", "unassign-role", "-u", "bob", "ClusterAdmin"))
    ok(det(cluster, "user-group", "remove-user", "editors", "bob"))
    one_line_error(det(cluster, *steer, env=bob), refusal)
    one_line_error(
        det(cluster, "user", "create", "erin", "--password", "erin-password", env=bob),
        "PERMISSION_TYPE_ADMINISTRATE_USER",
    )
    # The owner keeps what owners may do without a role.
    ok(det(cluster, *steer, env=alice))


def test_a_role_on_a_workspace_decides_there_only_even_after_a_kill(master: Cluster) -> None:
    cluster = master
    for name in ("alice", "bob"):
        ok(det(cluster, "user", "create", name, "--password", f"{name}-password"))
    alice, bob = (as_user(cluster, n, f"{n}-password") for n in ("alice", "bob"))
    experiments = {}
    for team in ("team-a", "team-b"):
        ok(det(cluster, "workspace", "create", team))
        project = json.loads(ok(det(cluster, "project", "create", team, "work", "--json")))
        experiments[team] = paused_experiment(cluster, alice, "--project_id", str(project["id"]))

    def steer(team: str) -> tuple[str, ...]:
        return ("experiment", "set", "priority", str(experiments[team]), "7")

    assert ok(det(cluster, "rbac", "assign-role", "Editor", "-u", "bob", "-w", "team-a")) == (
        "assigned role 'Editor' with ID 5 to user 'bob' with ID 3 to workspace team-a\n"
    )
    roles = json.loads(ok(det(cluster, "rbac", "list-users-roles", "bob", "--json")))
    (held,) = roles["roles"]
    (given,) = held["user_role_assignments"]
    assert given["role_assignment"]["scope_workspace_id"] == 2
    table = ok(det(cluster, "rbac", "list-users-roles", "bob"))
    assert "team-a" in table and "Scopeworkspacename" in table
    mine = ok(det(cluster, "rbac", "my-permissions", env=bob))
    assert "permissions assigned over workspace 'team-a' with ID '2'" in mine
    assert "global permissions assigned" not in mine

    # Who holds roles on a workspace, as any user sees it: users and groups, not elsewhere.
    ok(det(cluster, "user-group", "create", "lab", "--add-user", "alice"))
    ok(det(cluster, "rbac", "assign-role", "Viewer", "-g", "lab", "-w", "team-a"))
    members = ok(det(cluster, "workspace", "list-members", "team-a", env=alice))
    cells = [[c.strip() for c in line.split("|")] for line in members.splitlines()]
    assert cells[0] == ["User/Group Name", "User/Group", "Role Name"]
    assert sorted(cells[2:]) == [["bob", "U", "Editor"], ["lab", "G", "Viewer"]]
    csv_rows = ok(det(cluster, "workspace", "list-members", "team-a", "--csv")).splitlines()
    assert csv_rows[0] == "User/Group Name,User/Group,Role Name"
    assert sorted(csv_rows[1:]) == ["bob,U,Editor", "lab,G,Viewer"]
    listed = json.loads(ok(det(cluster, "workspace", "list-members", "team-a", "--json")))
    assert [g["name"] for g in listed["groups"]] == ["lab"]
    assert [u["username"] for u in listed["groups"][0]["users"]] == ["alice"]
    assert [u["username"] for u in listed["users_assigned_directly"]] == ["bob"]
    assert "Viewer" in ok(det(cluster, "workspace", "list-members", "team-a", "--yaml"))
    assert len(ok(det(cluster, "workspace", "list-members", "team-b")).splitlines()) == 2
    one_line_error(det(cluster, "workspace", "list-members", "nope"), "workspace 'nope' not found")
    ok(det(cluster, "rbac", "unassign-role", "Viewer", "-g", "lab", "-w", "team-a"))

    # Bob steers alice's experiment in team-a, not the one in team-b; so after a kill.
    for _ in range(2):
        ok(det(cluster, *steer("team-a"), env=bob))
        refusal = f"only the owner of experiment {experiments['team-b']} (alice) or a user with"
        one_line_error(det(cluster, *steer("team-b"), env=bob), refusal)
        restart_after_sigkill(cluster)

    ok(det(cluster, "rbac", "unassign-role", "Editor", "-u", "bob", "-w", "team-a"))
    one_line_error(det(cluster, *steer("team-a"), env=bob), "PERMISSION_TYPE_UPDATE_EXPERIMENT")
    assert ok(det(cluster, "rbac", "list-users-roles", "bob")) == "user has no role assignments\n"


def test_bad_input_is_one_line_naming_what_is_wrong(master: Cluster) -> None:
    cluster = master
    ok(det(cluster, "user", "create", "bob", "--password", "bob-password"))
    ok(det(cluster, "user-group", "create", "team"))
    for args, expected in (
        (("rbac", "assign-role", "-u", "bob", "Nope"), "role 'Nope' does not exist"),
        (("rbac", "assign-role", "-u", "bob", "Editor", "-w", "w"), "workspace 'w' not found"),
        (("w", "create", "lab"), ""),
        (
            ("rbac", "assign-role", "-u", "bob", "ClusterAdmin", "-w", "lab"),
            "role ClusterAdmin is assigned cluster-wide only",
        ),
        (("rbac", "unassign-role", "-u", "bob", "Editor", "-w", "lab"), "in workspace lab"),
        (("rbac", "assign-role", "Editor"), "exactly one of --username-to-assign"),
        (("rbac", "unassign-role", "-u", "bob", "Editor"), "bob does not hold role Editor"),
        (("rbac", "list-users-roles", "ghost"), "user ghost not found"),
        (("user-group", "add-user", "nope", "bob"), "user group 'nope' not found"),
        (("user-group", "add-user", "team", "bob,ghost"), "user ghost not found"),
        (("user-group", "create", "team"), "group 'team' already exists"),
        (("user-group", "delete", "team"), "pass --yes"),
        (("token", "create", "--lifespan", "forever"), "lifespan: 'forever' is not a duration"),
        (("token", "create", "-e", "99999"), "longer than the master allows"),
        (("token", "create", "ghost"), "user ghost not found"),
        (("token", "revoke", "999"), "access token 999 not found"),
        (("token", "describe", "999"), "access token 999 not found"),
        (("user", "edit", "bob"), "No field provided"),
        (("user", "edit", "ghost", "--display-name", "G"), "user ghost not found"),
        (("user", "rename", "bob", "b@d name"), "username:"),
    ):
        if expected:
            one_line_error(det(cluster, *args), expected)
        else:
            ok(det(cluster, *args))
    headers = {**bearer(cluster.token), "Content-Type": "application/json"}
    for path, body, status, expected in (
        ("/api/v1/tokens", {"userId": "abc"}, 400, "userId: expected an integer"),
        ("/api/v1/tokens", {"bogus": 1}, 400, "bogus"),
        ("/api/v1/tokens", {"userId": 1, "lifespan": "1y"}, 400, "lifespan"),
        (
            "/api/v1/roles/add-assignments",
            {"userRoleAssignments": [{"userId": 2, "roleAssignment": {"role": {"roleId": 42}}}]},
            404,
            "role 42 does not exist",
        ),
        ("/api/v1/groups", {"name": ""}, 400, "group name"),
    ):
        answer = requests.post(f"{cluster.url}{path}", json=body, headers=headers, timeout=30)
        assert answer.status_code == status, (path, answer.text)
        assert expected in answer.json()["error"]["error"], answer.text
    assert cluster.healthy()


def test_users_are_renamed_edited_and_listed_as_determined_does(
    master: Cluster, tmp_path: pathlib.Path
) -> None:
    cluster = master
    ok(det(cluster, "user", "create", "bob", "--password", "bob-password"))
    bob = as_user(cluster, "bob", "bob-password")
    exp_id = cluster.create(EXAMPLES / "minimal" / "const.yaml", EXAMPLES / "minimal", "--paused")
    fragment = tmp_path / "t.yaml"
    fragment.write_text("max_restarts: 2\n")
    ok(det(cluster, "template", "set", "t", str(fragment), env=bob))
    assert ok(det(cluster, "user", "edit", "bob", "--display-name", "Bob B.", env=bob)) == (
        "Changes made to the following fields: Display Name\n"
    )
    one_line_error(
        det(cluster, "user", "edit", "bob", "--admin", "true", env=bob),
        "PERMISSION_TYPE_ADMINISTRATE_USER",
    )
    ok(det(cluster, "user", "rename", "bob", "robert"))
    robert = as_user(cluster, "robert", "bob-password")
    shown = json.loads(ok(det(cluster, "user", "list", "--json", env=robert)))
    assert [(u["username"], u["display_name"]) for u in shown] == [
        ("admin", ""),
        ("robert", "Bob B."),
    ]
    # What bob owned is robert's: his template, which he may still change.
    ok(det(cluster, "template", "remove", "t", env=robert))
    ok(det(cluster, "user", "edit", "robert", "--active", "false"))
    assert "robert" not in ok(det(cluster, "user", "list"))
    assert "robert" in ok(det(cluster, "user", "list", "--all"))
    assert cluster.experiment(exp_id)["username"] == "admin"


def test_remote_users_agent_users_and_logging_out_of_every_session(master: Cluster) -> None:
    cluster = master
    assert ok(det(cluster, "user", "create", "carol", "--remote")) == "Created remote user carol\n"
    ok(det(cluster, "user", "create", "bob", "--password", "bob-password"))
    bob = as_user(cluster, "bob", "bob-password")
    # A remote user signs on elsewhere: no password is hers here.
    one_line_error(det(cluster, "user", "whoami", env=as_user(cluster, "carol", "x")))
    # (A partial identity is refused by the parser: test_agent_users.)
    link = (
        *("user", "link-with-agent-user", "carol", "--agent-uid", "1001", "--agent-gid", "100"),
        *("--agent-user", "carol", "--agent-group", "staff"),
    )
    one_line_error(det(cluster, *link, env=bob), "PERMISSION_TYPE_ADMINISTRATE_USER")
    ok(det(cluster, *link))
    (carol,) = [
        u
        for u in json.loads(ok(det(cluster, "user", "list", "--json")))
        if u["username"] == "carol"
    ]
    assert carol["remote"] is True
    assert carol["agent_user_group"] == {
        "agent_uid": 1001,
        "agent_gid": 100,
        "agent_user": "carol",
        "agent_group": "staff",
    }

    # Two sessions cached for this master (the admin's and bob's): --all ends both.
    ok(det(cluster, "user", "whoami", env=bob))
    env = {k: v for k, v in cluster.env.items() if k not in ("DET_USER", "DET_PASS")}
    address = ok(det(cluster, "user", "logout", "--all", env=env))
    assert address.startswith("Logged out of ") and address.endswith("(admin, bob)\n")
    assert ok(det(cluster, "user", "logout", "--all", env=env)).startswith("Not logged in to")
