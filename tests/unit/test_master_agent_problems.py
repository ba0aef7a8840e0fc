from __future__ import annotations

import time

from determined.api.gen import v1
from pydet.master.agents.hub import problems_of


def hello(*, clock_offset: float = 0.0, address: str = "198.18.0.2") -> v1.AgentHello:
    return v1.AgentHello(agent_id="a", address=address, clock=time.time() + clock_offset)


def test_a_well_set_up_agent_has_no_problems() -> None:
    assert problems_of(hello(), "198.18.0.2") == []
    assert problems_of(hello(address="127.0.0.1"), "127.0.0.1") == []
    # An agent too old to send its clock is not blamed for it.
    assert problems_of(v1.AgentHello(agent_id="a", address="198.18.0.2"), "198.18.0.2") == []


def test_a_clock_off_by_more_than_five_seconds_is_named() -> None:
    (ahead,) = problems_of(hello(clock_offset=90), "198.18.0.2")
    assert ahead.startswith("its clock is 90 s ahead of the master's")
    (behind,) = problems_of(hello(clock_offset=-30), "198.18.0.2")
    assert behind.startswith("its clock is 30 s behind the master's")
    assert problems_of(hello(clock_offset=3), "198.18.0.2") == []


def test_a_loopback_address_from_another_host_says_what_to_pass() -> None:
    (problem,) = problems_of(hello(address="127.0.0.1"), "198.18.0.7")
    assert "cannot reach it" in problem and "--address 198.18.0.7" in problem
