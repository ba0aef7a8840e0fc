"""Users as the API shows them (never their password hashes)."""

from __future__ import annotations

from determined.api.gen import v1
from determined.common import timestamps
from pydet.master import queries


def user_message(row: queries.UserRow) -> v1.User:
    """A user as the API shows it; ``admin``: whether they hold ClusterAdmin cluster-wide."""
    return v1.User(
        id=row.id,
        username=row.username,
        admin=row.admin,
        active=row.active,
        modified_at=timestamps.to_datetime(row.modified_at),
        display_name=row.display_name,
    )
