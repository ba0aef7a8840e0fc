"""Access tokens in the master: made once and kept only as a digest, acting as their user,
refused saying why once revoked, expired or their user deactivated, with Determined's
lifespans (Go durations, -1, the master's default and maximum)."""

from __future__ import annotations

import pytest

from determined.common import errors, timestamps
from pydet.master.auth import access_tokens, passwords
from pydet.master.auth.access_tokens import Lifespans, go_duration, lifespan_seconds
from tests.unit.test_auth import World, admin_caller, world

__all__ = ["world"]  # the fixture, shared with test_auth

DAY = 24 * 3600.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2s", 2.0),
        ("72h", 72 * 3600.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("1m0.5s", 60.5),
        (".5s", 0.5),
        ("0", 0.0),
        ("-5m", -300.0),
    ],
)
def test_lifespans_are_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "h", "2 s", "2d", "1h-30m", "abc", "1hh"])
def test_what_go_does_not_parse_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(errors.InvalidArgument, match=r"lifespan: .* is not a duration"):
        go_duration(text)


def test_a_lifespan_is_the_default_the_longest_or_what_was_asked_within_the_cap() -> None:
    spans = Lifespans(default_days=7, max_days=30)
    assert lifespan_seconds(None, spans) == 7 * DAY
    assert lifespan_seconds("-1", spans) == 30 * DAY
    assert lifespan_seconds("48h", spans) == 2 * DAY
    with pytest.raises(errors.InvalidArgument, match="longer than the master allows"):
        lifespan_seconds(f"{31 * 24}h", spans)
    for bad in ("0", "-2h"):
        with pytest.raises(errors.InvalidArgument, match="must be more than 0"):
            lifespan_seconds(bad, spans)
    # -1 in the config: Go's longest duration, as Determined's.
    assert Lifespans(max_days=-1).longest == access_tokens.MAX_ALLOWED_DAYS * DAY


async def _bob(world: World) -> int:
    created = await world.authn.create_user("bob", "bob-password", admin=False)
    return created.id


async def test_a_token_acts_as_its_user_and_only_its_digest_is_stored(world: World) -> None:
    bob = await _bob(world)
    made = await world.authn.tokens.create(bob, lifespan="1h", description="ci", by="admin")
    assert made.token.startswith(access_tokens.PREFIX) and made.token_id > 0
    caller = await world.caller(made.token)
    assert (caller.id, caller.username, caller.access_token) == (bob, "bob", made.token_id)
    # Never in clear: no column of the store holds the token itself.
    rows = await world.db.fetch_all("SELECT * FROM access_tokens")
    assert all(made.token not in str(v) for r in rows for v in dict(r).values())
    assert rows[0]["token_digest"] == passwords.token_digest(made.token)
    # A logout with it ends nothing: only a revocation does.
    await world.authn.logout(caller)
    assert await world.caller(made.token) == caller


async def test_a_revoked_token_is_refused_at_once_saying_so(world: World) -> None:
    bob = await _bob(world)
    made = await world.authn.tokens.create(bob, lifespan=None, description="", by="admin")
    await world.caller(made.token)  # checked once: cached
    info = await world.authn.tokens.patch(made.token_id, description=None, revoke=True, by="x")
    assert info.revoked and timestamps.to_seconds(info.revoked_at) == world.now[0]
    with pytest.raises(errors.Unauthenticated, match=f"access token {made.token_id} was revoked"):
        await world.authn.authenticate(made.token)
    with pytest.raises(errors.FailedPrecondition, match=r"was revoked at .* cannot be changed"):
        await world.authn.tokens.patch(made.token_id, description="x", revoke=False, by="x")


async def test_an_expired_token_is_refused_saying_when_it_expired(world: World) -> None:
    bob = await _bob(world)
    made = await world.authn.tokens.create(bob, lifespan="2s", description="", by="admin")
    await world.caller(made.token)
    world.now[0] += 2.5
    with pytest.raises(errors.Unauthenticated, match=f"access token {made.token_id} expired at"):
        await world.authn.authenticate(made.token)
    assert await world.authn.tokens.infos(user_id=bob, token_ids=[], show_inactive=False) == []
    (shown,) = await world.authn.tokens.infos(user_id=bob, token_ids=[], show_inactive=True)
    assert shown.id == made.token_id and not shown.revoked


async def test_a_deactivated_users_tokens_stop_and_start_with_them(world: World) -> None:
    admin = await admin_caller(world)
    bob = await _bob(world)
    made = await world.authn.tokens.create(bob, lifespan=None, description="", by="admin")
    await world.caller(made.token)
    await world.authn.patch_user(admin, "bob", active=False, admin=None)
    with pytest.raises(errors.Unauthenticated, match="belongs to user bob, who is deactivated"):
        await world.authn.authenticate(made.token)
    await world.authn.patch_user(admin, "bob", active=True, admin=None)
    assert (await world.caller(made.token)).username == "bob"


async def test_an_unknown_or_forged_token_is_refused(world: World) -> None:
    for token in (access_tokens.PREFIX + "x" * 43, access_tokens.PREFIX):
        with pytest.raises(errors.Unauthenticated, match="unknown access token"):
            await world.authn.authenticate(token)


async def test_bad_input_is_refused_naming_the_field(world: World) -> None:
    bob = await _bob(world)
    with pytest.raises(errors.NotFound, match="user 99 not found"):
        await world.authn.tokens.create(99, lifespan=None, description="", by="admin")
    with pytest.raises(errors.InvalidArgument, match="description: at most"):
        await world.authn.tokens.create(bob, lifespan=None, description="x" * 1001, by="admin")
    with pytest.raises(errors.InvalidArgument, match="lifespan"):
        await world.authn.tokens.create(bob, lifespan="forever", description="", by="admin")
    with pytest.raises(errors.NotFound, match="access token 42 not found"):
        await world.authn.tokens.patch(42, description="x", revoke=False, by="admin")


async def test_a_description_changes_and_the_list_shows_each_users_own(world: World) -> None:
    bob = await _bob(world)
    admin = await admin_caller(world)
    mine = await world.authn.tokens.create(admin.id, lifespan=None, description="a", by="admin")
    his = await world.authn.tokens.create(bob, lifespan=None, description="b", by="admin")
    info = await world.authn.tokens.patch(his.token_id, description="c", revoke=False, by="x")
    assert info.description == "c" and info.username == "bob"
    listed = await world.authn.tokens.infos(user_id=None, token_ids=[], show_inactive=False)
    assert [t.id for t in listed] == [mine.token_id, his.token_id]
    only = await world.authn.tokens.infos(user_id=bob, token_ids=[], show_inactive=False)
    assert [t.id for t in only] == [his.token_id]
    picked = await world.authn.tokens.infos(
        user_id=None, token_ids=[his.token_id], show_inactive=False
    )
    assert [t.description for t in picked] == ["c"]
