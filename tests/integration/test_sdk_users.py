"""The SDK's users against a real cluster, after Determined's e2e ``test_users.py``: create
them, look them up, change their passwords, names and display names, deactivate them, link
them with an agent user, and log out."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from determined.common.api import errors
from determined.experimental import client
from tests.cluster import Cluster, cluster_fixture

PASSWORD = "Sdk-users-1"
NEW_PASSWORD = "newPass123!"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path_factory.mktemp("sdk-users"))


@pytest.fixture(scope="module", autouse=True)
def private_token_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Sessions cached by these tests go to a directory of their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
        mp.delenv("DET_USER", raising=False)
        mp.delenv("DET_PASS", raising=False)
        yield


_OPENED: list[client.Determined] = []


@pytest.fixture(scope="module", autouse=True)
def close_sessions() -> Iterator[None]:
    yield
    for d in _OPENED:
        d.close()


def session(cluster: Cluster, user: str, password: str | None = None) -> client.Determined:
    """The SDK as ``user`` (closed when the module ends)."""
    d = client.Determined(master=cluster.address, user=user, password=password)
    _OPENED.append(d)
    return d


def new_user(det: client.Determined, name: str) -> client.User:
    user = det.create_user(name, admin=False, password=PASSWORD)
    assert user.user_id and user.username == name
    return user


def test_create_and_look_up_users(det: client.Determined) -> None:
    made = new_user(det, "d62cc542-bf37-44df-9343-407f727387f5")
    by_name = det.get_user_by_name("d62cc542-bf37-44df-9343-407f727387f5")
    by_id = det.get_user_by_id(made.user_id)
    for user in (by_name, by_id):
        assert (user.user_id, user.username, user.admin, user.active) == (
            made.user_id,
            made.username,
            False,
            True,
        )
        assert (user.remote, user.display_name, user.agent_user) == (False, "", None)
    assert made.user_id in [u.user_id for u in det.list_users()]
    me = det.whoami()
    assert (me.username, me.admin) == ("admin", True)
    assert det.get_session_username() == "admin"


def test_a_weak_password_is_refused_before_the_user_exists(det: client.Determined) -> None:
    with pytest.raises(ValueError, match="\u2717 password must include an uppercase letter"):
        det.create_user("weak", admin=False, password="lowercase-1")
    with pytest.raises(errors.NotFoundException, match="user weak not found"):
        det.get_user_by_name("weak")


def test_a_missing_user_is_named(det: client.Determined) -> None:
    with pytest.raises(errors.NotFoundException, match="user 424242 not found"):
        det.get_user_by_id(424242)
    with pytest.raises(errors.NotFoundException, match="user nobody not found"):
        det.get_user_by_name("nobody")
    with pytest.raises(ValueError, match="positive integer"):
        det.get_user_by_id(0)


def test_deactivated_users_cannot_log_in(cluster: Cluster, det: client.Determined) -> None:
    user = new_user(det, "to-deactivate")
    user.deactivate()
    assert user.active is False
    assert "to-deactivate" in [u.username for u in det.list_users(active=False)]
    assert "to-deactivate" not in [u.username for u in det.list_users(active=True)]
    with pytest.raises(errors.ForbiddenException, match="deactivated"):
        session(cluster, "to-deactivate", PASSWORD).whoami()
    user.activate()
    assert user.active is True
    assert session(cluster, "to-deactivate", PASSWORD).whoami().username == "to-deactivate"


def test_change_password_by_an_admin_and_by_the_user(
    cluster: Cluster, det: client.Determined
) -> None:
    user = new_user(det, "password-changer")
    det.get_user_by_name("password-changer").change_password(NEW_PASSWORD)
    with pytest.raises(errors.UnauthenticatedException):
        session(cluster, "password-changer", PASSWORD).whoami()
    own = session(cluster, "password-changer", NEW_PASSWORD)
    own.get_user_by_name("password-changer").change_password(PASSWORD)
    with pytest.raises(errors.UnauthenticatedException):
        session(cluster, "password-changer", NEW_PASSWORD).whoami()
    assert session(cluster, "password-changer", PASSWORD).whoami().user_id == user.user_id
    with pytest.raises(ValueError, match="at least 8 characters"):
        user.change_password("Ab1")


def test_display_names(cluster: Cluster, det: client.Determined) -> None:
    user = new_user(det, "displayed")
    own = session(cluster, "displayed", PASSWORD)
    own.get_user_by_id(user.user_id).change_display_name("renamed display-name")
    assert det.get_user_by_id(user.user_id).display_name == "renamed display-name"
    user.change_display_name("renamedSDK")
    assert det.get_user_by_id(user.user_id).display_name == "renamedSDK"
    with pytest.raises(errors.APIException, match="display_name"):
        user.change_display_name("Admin")
    other = new_user(det, "someone-else")
    with pytest.raises(errors.ForbiddenException, match="PERMISSION_TYPE_ADMINISTRATE_USER"):
        own.get_user_by_id(other.user_id).change_display_name("mine")
    user.change_display_name("")
    assert det.get_user_by_id(user.user_id).display_name == ""


def test_a_renamed_user_keeps_their_experiments_and_session(
    cluster: Cluster, det: client.Determined, tmp_path: pathlib.Path
) -> None:
    user = new_user(det, "rename-user-64")
    own = session(cluster, "rename-user-64", PASSWORD)
    config = {
        "name": "owned",
        "entrypoint": "true",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
    }
    exp = own.create_experiment(config, str(tmp_path), activate=False)
    user.rename("rename-user-65")
    assert det.get_user_by_name("rename-user-65").user_id == user.user_id
    with pytest.raises(errors.NotFoundException, match="user rename-user-64 not found"):
        det.get_user_by_name("rename-user-64")
    # The session goes on under the new name, and the experiment is still theirs.
    assert own.whoami().username == "rename-user-65"
    assert [e.id for e in det.list_experiments(users=["rename-user-65"])] == [exp.id]
    own.get_experiment(exp.id).kill()
    new_user(det, "taken-name")
    with pytest.raises(errors.APIException, match="user taken-name already exists"):
        user.rename("taken-name")
    with pytest.raises(errors.APIException, match="cannot be 'admin'"):
        user.rename("admin")


def test_link_with_agent_user(cluster: Cluster, det: client.Determined) -> None:
    user = new_user(det, "linked")
    user.link_with_agent(agent_uid=200, agent_gid=300, agent_user="someuser", agent_group="g")
    again = det.get_user_by_id(user.user_id)
    assert (again.agent_uid, again.agent_gid, again.agent_user, again.agent_group) == (
        200,
        300,
        "someuser",
        "g",
    )
    with pytest.raises(errors.APIException, match="given together"):
        user.link_with_agent(agent_uid=1000, agent_gid=1000)
    with pytest.raises(errors.ForbiddenException, match="PERMISSION_TYPE_ADMINISTRATE_USER"):
        session(cluster, "linked", PASSWORD).get_user_by_id(user.user_id).link_with_agent()
    user.link_with_agent()
    assert det.get_user_by_id(user.user_id).agent_user is None


def test_a_remote_user_has_no_password(cluster: Cluster, det: client.Determined) -> None:
    remote = det.create_user("sso-only", admin=False, remote=True)
    assert remote.remote is True
    with pytest.raises(errors.UnauthenticatedException):
        session(cluster, "sso-only", PASSWORD).whoami()


def test_logout_ends_the_session_and_forgets_it(cluster: Cluster, det: client.Determined) -> None:
    new_user(det, "leaver")
    first = session(cluster, "leaver", PASSWORD)
    assert first.whoami().username == "leaver"
    token = first._session.session_token()
    assert cluster.fetch("/api/v1/me", token)[0] == 200
    first.logout()
    # The master ended the session, and no cached one is left to log in with.
    assert cluster.fetch("/api/v1/me", token)[0] == 401
    with pytest.raises(errors.UnauthenticatedException, match="not logged in"):
        session(cluster, "leaver").whoami()


MODULE_FUNCTIONS = """
import warnings
from determined.common.api import errors
from determined.experimental import client

client.login(master={master!r}, user="admin", password={password!r})
user = client.create_user("from-module", admin=False, password="Module-fn-1")
print("created", user.username, client.get_user_by_id(user.user_id).username)
print("named", client.get_user_by_name("from-module").user_id == user.user_id)
print("me", client.whoami().username, client.get_session_username())
print("listed", "from-module" in [u.username for u in client.list_users()])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        list(client.stream_trials_metrics([], "training"))
    except errors.APIException as e:
        print("refused", e)
print("warned", sorted({{w.category.__name__ for w in caught}}))
client.logout()
print("logged out")
client.logout()
"""


def test_the_client_modules_functions(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    code = MODULE_FUNCTIONS.format(master=cluster.address, password=cluster.admin_password)
    env = {k: v for k, v in cluster.env.items() if k not in ("DET_USER", "DET_PASS")}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "created from-module from-module",
        "named True",
        "me admin admin",
        "listed True",
        "refused trial_ids: name at least one trial",
        "warned ['FutureWarning']",
        "logged out",
    ]
    # The second logout has nothing to log out of, and says so.
    assert "has no session to log out of" in out.stderr
