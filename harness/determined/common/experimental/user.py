"""``User``: an account on the cluster, and what an admin (or the user) changes about it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from determined.common.experimental._util import InvalidValue

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession


def check_password_complexity(password: str | None) -> None:
    """Refuse, before asking the master, a password that Determined's SDK refuses: one
    under 8 characters, or without an upper-case letter, a lower-case letter or a digit.

    Raises:
        ValueError: every requirement, each marked met or not, one a line.
    """
    given = password or ""
    checks = [
        (bool(given), "password cannot be blank"),
        (len(given) >= 8, "password must have at least 8 characters"),
        (re.search(r"[A-Z]", given) is not None, "password must include an uppercase letter"),
        (re.search(r"[a-z]", given) is not None, "password must include a lowercase letter"),
        (re.search(r"\d", given) is not None, "password must include a number"),
    ]
    if not all(ok for ok, _ in checks):
        marks = [("\u2713 " if ok else "\u2717 ") + what for ok, what in checks]
        raise InvalidValue("\n".join(marks))


class User:
    """A user: ``user_id``, ``username``, ``admin``, ``active``, ``remote`` (signs on through
    an identity provider), ``display_name`` and the agent user and group its tasks run as
    (``agent_uid``, ``agent_gid``, ``agent_user``, ``agent_group``).

    Get one from ``client.get_user_by_id``, ``get_user_by_name``, ``whoami``,
    ``list_users`` or ``create_user``. The attributes are as last read; the methods change
    the user on the master and read it again.
    """

    def __init__(self, user_id: int, session: MasterSession) -> None:
        self.user_id = user_id
        self._session = session
        self.username: str | None = None
        self.admin: bool | None = None
        self.active: bool | None = None
        self.remote: bool | None = None
        self.agent_uid: int | None = None
        self.agent_gid: int | None = None
        self.agent_user: str | None = None
        self.agent_group: str | None = None
        self.display_name: str | None = None

    def __repr__(self) -> str:
        return f"User(user_id={self.user_id}, username={self.username})"

    def _hydrate(self, u: v1.User) -> None:
        self.username = u.username
        self.admin = u.admin
        self.active = u.active
        self.remote = u.remote
        self.display_name = u.display_name
        group = u.agent_user_group
        self.agent_uid = None if group is None else group.agent_uid
        self.agent_gid = None if group is None else group.agent_gid
        self.agent_user = None if group is None else group.agent_user
        self.agent_group = None if group is None else group.agent_group

    @classmethod
    def _from_proto(cls, u: v1.User, session: MasterSession) -> User:
        user = cls(u.id, session)
        user._hydrate(u)
        return user

    def reload(self) -> None:
        """Read the user again.

        Raises:
            errors.NotFoundException: there is no user with this id.
        """
        from determined.api.gen import v1

        request = v1.GetUserRequest(user_id=self.user_id)
        resp = self._session.call(lambda stub: stub.get_user(request))
        if resp.user is not None:
            self._hydrate(resp.user)

    def _patch(self, change: v1.PatchUser) -> None:
        from determined.api.gen import v1

        request = v1.PatchUserRequest(user_id=self.user_id, user=change)
        resp = self._session.call(lambda stub: stub.patch_user(request))
        if resp.user is not None:
            self._hydrate(resp.user)

    def rename(self, new_username: str) -> None:
        """Give the user a new username; their experiments and sessions go with them."""
        from determined.api.gen import v1

        self._patch(v1.PatchUser(username=new_username))

    def activate(self) -> None:
        """Let the user log in again (admins only)."""
        from determined.api.gen import v1

        self._patch(v1.PatchUser(active=True))

    def deactivate(self) -> None:
        """Keep the user from logging in, and end their sessions (admins only)."""
        from determined.api.gen import v1

        self._patch(v1.PatchUser(active=False))

    def change_display_name(self, display_name: str) -> None:
        """Show ``display_name`` instead of the username (``""`` shows the username again)."""
        from determined.api.gen import v1

        self._patch(v1.PatchUser(display_name=display_name))

    def change_password(self, new_password: str) -> None:
        """Set the user's password (their own, or anyone's for an admin); their other
        sessions end.

        Raises:
            ValueError: the password does not meet the complexity requirements.
        """
        from determined.api.gen import v1

        check_password_complexity(new_password)
        if self.username is None:
            self.reload()
        request = v1.SetUserPasswordRequest(username=self.username or "", password=new_password)
        self._session.call(lambda stub: stub.set_user_password(request))

    def link_with_agent(
        self,
        agent_uid: int | None = None,
        agent_gid: int | None = None,
        agent_user: str | None = None,
        agent_group: str | None = None,
    ) -> None:
        """Set the Unix user and group the user's tasks run as on agents: all four, or none
        to clear them (admins only)."""
        from determined.api.gen import v1

        group = v1.AgentUserGroup(
            agent_uid=agent_uid, agent_gid=agent_gid, agent_user=agent_user, agent_group=agent_group
        )
        self._patch(v1.PatchUser(agent_user_group=group))
