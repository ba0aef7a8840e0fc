"""The lifecycle state of experiments and trials, as the SDK returns it.

``ExperimentState`` is the master's ``v1.State``, made from the generated tables
(``v1_schema``): the same names, without the proto's ``STATE_`` prefix, and the same
numbers, so the ``.proto`` file is their only source. The tables, not ``v1`` itself: the SDK
loads ``v1`` only for its first call (a few hundred milliseconds), and an import of the SDK
stays without it. It is a plain ``enum.Enum``, as in Determined; mypy reads it as
``v1.State``, which has the same members.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from determined.api.gen import v1_schema

if TYPE_CHECKING:
    from determined.api.gen import v1

    ExperimentState = v1.State
else:
    ExperimentState = enum.Enum(
        "ExperimentState",
        [(name.removeprefix("STATE_"), number) for name, number in v1_schema.ENUMS["State"]],
        module=__name__,
    )
    ExperimentState.__doc__ = (
        "An experiment's or a trial's state (Determined's names and numbers, those of the\n"
        "    master's ``v1.State``)."
    )
