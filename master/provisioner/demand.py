"""How many new instances a pool's queued work needs: ``Snapshot.wanted`` for the decider.

The rule, for the requests the scheduler could not place (``pending``, in slots each):

1. Largest first, each request goes into the first connected agent whose free slots hold
   it (first-fit decreasing). The scheduler has tried these agents already, so this rarely
   places anything; it keeps a pool from growing for work that fits once the scheduler runs
   again (a slot freed between its pass and this count).
2. A request larger than one instance is a multi-node trial: it needs
   ``ceil(slots / slots_per_instance)`` whole new instances of its own.
3. The others are packed, largest first, into the first new instance with room, a new one
   opened when none has (first-fit decreasing again, which needs at most about 11/9 of
   the fewest instances possible).
4. A request for zero slots (a CPU-only task) needs an instance only when no agent is
   connected and nothing else is being launched: it runs on any agent.

Pure: nothing of the master, no I/O; the caller gathers the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from determined.common import errors


def instances_wanted(pending: Sequence[int], free: Sequence[int], slots_per_instance: int) -> int:
    """The number of new instances ``pending`` needs (see the module's rule).

    ``free`` holds the free slots of each connected agent of the pool, in any fixed order
    (it is the first-fit order); ``slots_per_instance`` is what one new instance brings.
    """
    if slots_per_instance < 1:
        raise errors.InvalidArgument(
            f"slots_per_instance {slots_per_instance}: an instance must bring at least 1 slot"
        )
    if any(n < 0 for n in pending) or any(n < 0 for n in free):
        raise errors.InvalidArgument("slot counts must be >= 0")
    connected = [n for n in free if n > 0]
    rooms: list[int] = []  # free slots left on the new instances that still have some
    new = 0
    for slots in sorted((n for n in pending if n > 0), reverse=True):
        if _fit_first(connected, slots):
            continue
        if slots > slots_per_instance:
            new += -(-slots // slots_per_instance)
        elif not _fit_first(rooms, slots):
            new += 1
            if slots < slots_per_instance:
                rooms.append(slots_per_instance - slots)
    if new == 0 and not free and any(n == 0 for n in pending):
        return 1
    return new


def _fit_first(bins: list[int], slots: int) -> bool:
    """Takes ``slots`` from the first bin with room; a bin left empty is dropped, which
    keeps the scan short when many small requests fill many bins."""
    for i, room in enumerate(bins):
        if room >= slots:
            if room == slots:
                del bins[i]
            else:
                bins[i] = room - slots
            return True
    return False
