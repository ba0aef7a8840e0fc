"""Login failures slow down the next attempts for the same user name or address."""

from __future__ import annotations

from pydet.master.auth.throttle import LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttle(clock: Clock, **kwargs: float) -> LoginThrottle:
    return LoginThrottle(
        free_failures=3, base_delay=0.25, max_delay=8.0, forget_after=900.0, clock=clock, **kwargs
    )


def test_the_first_failures_are_free_then_each_waits_twice_as_long_up_to_a_cap() -> None:
    t = throttle(Clock())
    delays = []
    for _ in range(10):
        delays.append(t.delay(["user:admin"]))
        t.failed(["user:admin"])
    assert delays == [0.0, 0.0, 0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_failures_for_one_user_do_not_slow_another_user_from_another_address() -> None:
    t = throttle(Clock())
    for _ in range(6):
        t.failed(["user:admin", "addr:10.0.0.1"])
    assert t.delay(["user:admin", "addr:10.0.0.2"]) > 0
    assert t.delay(["user:alice", "addr:10.0.0.1"]) > 0
    assert t.delay(["user:alice", "addr:10.0.0.2"]) == 0.0


def test_an_address_that_tries_many_names_is_slowed_whatever_the_name() -> None:
    t = throttle(Clock())
    for i in range(6):
        t.failed([f"user:guess{i}", "addr:10.0.0.9"])
    assert t.delay(["user:fresh-name", "addr:10.0.0.9"]) == 2.0


def test_a_success_clears_the_users_count() -> None:
    t = throttle(Clock())
    for _ in range(6):
        t.failed(["user:admin"])
    t.succeeded("user:admin")
    assert t.delay(["user:admin"]) == 0.0


def test_a_forgiven_attempt_takes_back_exactly_one_failure() -> None:
    t = throttle(Clock())
    for _ in range(5):
        t.failed(["user:admin", "addr:a"])
    t.forgive(["user:admin", "addr:a"])
    assert t.delay(["user:admin"]) == 0.5  # four failures left
    t.forgive(["addr:unknown"])  # nothing to take back: no error
    for _ in range(4):
        t.forgive(["addr:a"])
    assert t.delay(["addr:a"]) == 0.0


def test_failures_are_forgotten_after_a_quiet_while() -> None:
    clock = Clock()
    t = throttle(clock)
    for _ in range(8):
        t.failed(["user:admin"])
    clock.now += 899
    assert t.delay(["user:admin"]) == 8.0
    clock.now += 2
    assert t.delay(["user:admin"]) == 0.0


def test_the_table_stays_bounded_under_a_flood_of_made_up_names() -> None:
    t = LoginThrottle(free_failures=1, base_delay=1.0, max_entries=100, clock=Clock())
    t.failed(["user:first"])
    for i in range(10_000):
        t.failed([f"user:made-up-{i}"])
    # The oldest entries made room for the newest ones.
    assert t.delay(["user:first"]) == 0.0
    assert t.delay(["user:made-up-9999"]) == 1.0
    assert len(t._failures) == 100
