from __future__ import annotations

import json
import random

from pydet.master.search import words
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


def test_saved_ids_read_back_the_same_through_any_change() -> None:
    rng = random.Random(5)
    ids = RequestIds(["r2", "r9", "trial-a"])
    for _ in range(500):
        rid = f"r{rng.randint(1, 60)}"
        change = rng.choice(["add", "add", "add", "discard", "ior"])
        if change == "add":
            ids.add(rid)
        elif change == "discard":
            ids.discard(rid)
        else:
            ids |= {rid, "r07"}
        saved = json.loads(json.dumps(ids.to_json()))
        assert RequestIds.from_json(saved) == ids


def test_ids_finished_in_creation_order_save_as_one_run() -> None:
    ids = RequestIds()
    for n in [3, 1, 2, 5, 4]:
        ids.add(f"r{n}")
    assert words.unpack(ids.to_json()["runs"]) == (1, 5)
    ids.add("r10")
    ids.add("trial-a")
    assert ids.to_json() == {"runs": words.pack([1, 5, 10, 10]), "others": ["trial-a"]}


def test_a_state_saved_as_runs_in_a_list_still_reads() -> None:
    assert RequestIds.from_json([[1, 3], "r7", [9, 9]]) == {"r1", "r2", "r3", "r7", "r9"}


def test_a_state_saved_as_a_list_of_ids_still_reads() -> None:
    assert RequestIds.from_json(["r1", "r2", "r4"]) == {"r1", "r2", "r4"}
