"""Instances from the admin's own programs, for clusters that are not on a cloud pydet
knows (as Slurm's power saving runs ResumeProgram and SuspendProgram):

- ``launch AGENT_ID``, with the instance's startup script on stdin: starts one machine
  that runs the script, and prints the new instance's id (its last line of output);
- ``terminate ID...``: ends those instances;
- ``list``: prints every instance it knows of, one JSON object a line:
  ``{"id": ..., "state": "starting|running|stopping|stopped|terminated",
  "launched_at": EPOCH_SECONDS, "agent_id": ...}``.

Each runs as an argv list (no shell) with a time limit; a non-zero exit, a time-out or
output that does not read is a ProviderError naming the program and its last line.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

from pydet.master.provisioner.decider import Instance, InstanceState
from pydet.master.provisioner.provider import ProviderError
from pydet.master.provisioner.settings import CommandSettings

# What the programs may print at most: the master never reads without bound.
MAX_OUTPUT = 4 * 1024 * 1024


class CommandProvider:
    def __init__(self, settings: CommandSettings, *, pool: str) -> None:
        self.settings = settings
        self.pool = pool

    async def list_instances(self) -> list[Instance]:
        out = await self._run(self.settings.list, [])
        instances = []
        for n, line in enumerate(out.splitlines(), 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                instance = Instance(
                    id=str(raw["id"]),
                    state=InstanceState[str(raw["state"]).upper()],
                    launched_at=float(raw.get("launched_at", 0.0)),
                    agent_id=str(raw.get("agent_id", "")),
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                raise ProviderError(
                    f"{self.settings.list[0]} printed line {n} that is not an instance "
                    f'({{"id", "state", "launched_at", "agent_id"}}): {line[:200]!r}'
                ) from None
            instances.append(instance)
        return instances

    async def launch(self, agent_id: str, startup: str) -> Instance:
        out = await self._run(self.settings.launch, [agent_id], stdin=startup)
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        if not lines:
            raise ProviderError(f"{self.settings.launch[0]} printed no instance id")
        return Instance(
            id=lines[-1], state=InstanceState.STARTING, launched_at=time.time(), agent_id=agent_id
        )

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        await self._run(self.settings.terminate, list(instance_ids))

    async def _run(self, argv: Sequence[str], args: list[str], *, stdin: str = "") -> str:
        name = argv[0]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as e:
            raise ProviderError(f"cannot run {name}: {e.strerror or e}") from None
        try:
            async with asyncio.timeout(self.settings.timeout):
                out, err, _ = await asyncio.gather(
                    _read(proc.stdout, MAX_OUTPUT),
                    _read(proc.stderr, 64 * 1024),
                    _write(proc.stdin, stdin.encode()),
                )
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ProviderError(
                f"{name} did not finish within {self.settings.timeout:g} s; it was killed"
            ) from None
        if len(out) > MAX_OUTPUT:
            raise ProviderError(f"{name} printed more than {MAX_OUTPUT} bytes")
        if proc.returncode != 0:
            last = (err.decode(errors="replace").strip().splitlines() or [""])[-1]
            raise ProviderError(f"{name} exited {proc.returncode}: {last[:300]}")
        return out.decode(errors="replace")


async def _read(stream: asyncio.StreamReader | None, limit: int) -> bytes:
    """Up to ``limit`` + 1 bytes of ``stream`` (the rest is drained and dropped), so that a
    program printing without end cannot grow the master's memory."""
    assert stream is not None
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) <= limit:
            kept += chunk[: limit + 1 - len(kept)]
    return bytes(kept)


async def _write(stream: asyncio.StreamWriter | None, data: bytes) -> None:
    assert stream is not None
    try:
        stream.write(data)
        await stream.drain()
        stream.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the program did not read its stdin: that is its business
