from __future__ import annotations

import random

from pydet.master.search.request_ids import RequestIds, rid_sorted


def test_request_ids_stay_in_creation_order_through_any_change() -> None:
    rng = random.Random(3)
    ids = RequestIds(["r3", "r1"])
    assert ids.ordered() == ["r1", "r3"]
    for _ in range(500):
        rid = f"r{rng.randint(1, 60)}"
        change = rng.choice(["add", "add", "discard", "ior", "isub", "update"])
        if change == "add":
            ids.add(rid)
        elif change == "discard":
            ids.discard(rid)
        elif change == "ior":
            ids |= {rid, "r7"}
        elif change == "isub":
            ids -= {rid}
        else:
            ids.update([rid])
        assert ids.ordered() == sorted(ids, key=lambda r: int(r[1:]))


def test_creation_order_is_numeric_not_alphabetical() -> None:
    assert rid_sorted({"r10", "r9", "r100", "r1"}) == ["r1", "r9", "r10", "r100"]
