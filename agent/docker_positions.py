"""How far each container's log was sent to the master, kept on disk for the next agent
process.

An agent that is killed leaves its containers running; the next one follows their logs
again from the engine. Starting after the last line the previous process sent, rather
than from the beginning or from "now", neither repeats a whole log nor drops what was
printed while no agent was listening. Positions are engine timestamps (nanoseconds), one
small file per container, written at most every ``interval`` seconds: lines handed on
after the last write are handed on again by the next process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from pathlib import Path

log = logging.getLogger(__name__)

SAVE_INTERVAL = 0.1


class LogPositions:
    def __init__(self, directory: Path, *, interval: float = SAVE_INTERVAL) -> None:
        self._dir = directory
        self._interval = interval
        self._latest: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        # A write under way must not bring back the file of a container just forgotten.
        self._lock = asyncio.Lock()
        self._saver: asyncio.Task[None] | None = None

    def update(self, container_id: str, position_ns: int) -> None:
        """The container's log was handed on up to ``position_ns``; saved soon."""
        self._latest[container_id] = position_ns
        self._dirty.add(container_id)
        self._wake.set()
        if self._saver is None:
            self._saver = asyncio.create_task(self._save(), name="log-positions")

    async def read(self, container_id: str) -> int:
        """The saved position, 0 when there is none (follow the log from its start)."""
        return await asyncio.to_thread(self._read, container_id)

    async def forget(self, container_id: str) -> None:
        """The container is gone: drop its position, on disk too."""
        self._latest.pop(container_id, None)
        self._dirty.discard(container_id)
        async with self._lock:
            await asyncio.to_thread((self._dir / container_id).unlink, missing_ok=True)

    async def prune(self, keep: Collection[str]) -> None:
        """Drop the positions of every container not in ``keep`` (left by a crash)."""
        await asyncio.to_thread(self._prune, set(keep))

    async def close(self) -> None:
        if self._saver is not None:
            self._saver.cancel()
            await asyncio.gather(self._saver, return_exceptions=True)
            self._saver = None

    async def _save(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            snapshot = {cid: self._latest[cid] for cid in self._dirty if cid in self._latest}
            self._dirty.clear()
            try:
                async with self._lock:
                    await asyncio.to_thread(self._write, snapshot)
            except OSError as e:
                log.warning("cannot save log positions in %s: %s", self._dir, e)
            await asyncio.sleep(self._interval)

    def _write(self, positions: dict[str, int]) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        for cid, ns in positions.items():
            tmp = self._dir / f".{cid}.tmp"
            tmp.write_text(str(ns))
            tmp.replace(self._dir / cid)

    def _read(self, container_id: str) -> int:
        try:
            return int((self._dir / container_id).read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def _prune(self, keep: set[str]) -> None:
        if not self._dir.is_dir():
            return
        for path in self._dir.iterdir():
            if path.name not in keep:
                path.unlink(missing_ok=True)
