"""The cluster-wide message (Determined's cluster_messages): one at a time, shown between its
start and end times to every user (GetMaster carries it; the WebUI shows it as a banner).

Setting a message ends the one before; clearing ends the current one now. Rows are kept, as
Determined keeps them, and the newest row is the message. The current one is cached, so
GetMaster, which every CLI command and every WebUI page asks, reads no row.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from determined.api.gen import v1
from determined.common import errors, timestamps
from pydet.master.store.db import Database

MAX_LENGTH = 250  # characters, as Determined

# A Go duration ("1h30m", "90s", "1.5h"), plus days and weeks, which the help of Determined's
# CLI promises ("24h, 2w, 5d").
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 7 * 86400.0,
}


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``24h``, ``1h30m`` or ``5d``."""
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        raise errors.InvalidArgument(
            f"duration: {text!r} is not a duration such as 30m, 24h, 5d or 2w"
        )
    return total


@dataclass(frozen=True)
class Message:
    message: str
    start_time: float
    end_time: float | None
    created_time: float

    def shown_at(self, now: float) -> bool:
        return self.start_time <= now and (self.end_time is None or now < self.end_time)

    def to_proto(self) -> v1.ClusterMessage:
        return v1.ClusterMessage(
            message=self.message,
            start_time=timestamps.to_datetime(self.start_time),
            end_time=timestamps.to_datetime(self.end_time),
            created_time=timestamps.to_datetime(self.created_time),
        )


class ClusterMessages:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._newest: Message | None = None

    async def load(self) -> None:
        row = await self._db.fetch_one(
            "SELECT message, start_time, end_time, created_time FROM cluster_messages"
            " ORDER BY id DESC LIMIT 1"
        )
        self._newest = (
            None
            if row is None
            else Message(row["message"], row["start_time"], row["end_time"], row["created_time"])
        )

    def shown(self, now: float | None = None) -> Message | None:
        """The message users see now."""
        m = self._newest
        return m if m is not None and m.shown_at(time.time() if now is None else now) else None

    def current(self, now: float | None = None) -> Message | None:
        """The message shown now or later (Determined's GetClusterMessage)."""
        m = self._newest
        now = time.time() if now is None else now
        return m if m is not None and (m.end_time is None or now < m.end_time) else None

    async def set(
        self,
        text: str,
        *,
        username: str,
        start_time: float = 0.0,
        end_time: float | None = None,
        duration: str | None = None,
    ) -> Message:
        now = time.time()
        if not text.strip():
            raise errors.InvalidArgument("message: required (det master cluster-message set -m)")
        if len(text) > MAX_LENGTH:
            raise errors.InvalidArgument(
                f"message: at most {MAX_LENGTH} characters; got {len(text)}"
            )
        if end_time is not None and duration is not None:
            raise errors.InvalidArgument("end_time and duration: give one or the other")
        start = start_time or now
        if duration is not None:
            end_time = start + parse_duration(duration)
        if end_time is not None and end_time < start:
            raise errors.InvalidArgument("end_time: must be after the start time")
        if end_time is not None and end_time < now:
            raise errors.InvalidArgument("end_time: must be in the future")
        message = Message(text, start, end_time, now)
        async with self._db.atomic():
            await self._end_current(now)
            await self._db.execute(
                "INSERT INTO cluster_messages (message, start_time, end_time, created_time,"
                " created_by) VALUES (?, ?, ?, ?, ?)",
                (text, start, end_time, now, username),
            )
        self._newest = message
        return message

    async def clear(self) -> None:
        now = time.time()
        await self._end_current(now)
        await self.load()

    async def _end_current(self, now: float) -> None:
        await self._db.execute(
            "UPDATE cluster_messages SET end_time = ? WHERE end_time IS NULL OR end_time > ?",
            (now, now),
        )
