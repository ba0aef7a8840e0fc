"""The network every multi-host test builds its hosts in (tests/netns.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.netns import Network, Refused


@pytest.fixture
def network() -> Iterator[Network]:
    """A bridge for hosts; skips the test where namespaces are refused (not root, say)."""
    try:
        net = Network()
    except Refused as e:
        pytest.skip(f"network namespaces are refused here: {e}")
    try:
        yield net
    finally:
        net.close()
