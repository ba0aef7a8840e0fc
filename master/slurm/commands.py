"""Running the Slurm client commands (``sinfo``, ``sbatch``, ``squeue``, ``scancel``) for
the Slurm pool: one command with a timeout, its stdout or a ``SlurmCommandError`` whose
message is the client's error output shaped into one readable line."""

from __future__ import annotations

import asyncio
import contextlib
import re

# Seconds any Slurm command may take before the pool gives up on it.
COMMAND_TIMEOUT = 30.0


class SlurmCommandError(Exception):
    """A Slurm command failed; the message is its one-line reason."""


async def slurm_command(*argv: str, stdin: str | None = None) -> str:
    """Run a Slurm client command with a timeout; its stdout, or SlurmCommandError."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as e:
        raise SlurmCommandError(f"cannot run {argv[0]}: {e.strerror or e}") from None
    try:
        async with asyncio.timeout(COMMAND_TIMEOUT):
            out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise SlurmCommandError(
            f"{argv[0]} did not answer within {COMMAND_TIMEOUT:.0f}s (is slurmctld up?)"
        ) from None
    if proc.returncode != 0:
        text = one_line(err.decode(errors="replace")) or f"exit code {proc.returncode}"
        raise SlurmCommandError(f"{argv[0]} failed: {text}")
    return out.decode(errors="replace")


def one_line(stderr: str) -> str:
    """A Slurm client's error output as one readable line: its last error (the outcome),
    with the munge error that caused it, if any, and a hint where the cause is common.

    A client that cannot authenticate prints four lines of which the last says only
    "Protocol authentication error"; the munge line says which socket it tried."""
    lines = []
    for raw in stderr.splitlines():
        line = " ".join(raw.split())
        line = re.sub(r"^[a-z_]+: error: ", "", line)
        if line:
            lines.append(line)
    if not lines:
        return ""
    text = lines[-1]
    munge = next((line for line in lines if line.startswith("Munge ")), None)
    if munge is not None and munge != text:
        text = f"{text} ({munge})"
    if "Unable to contact slurm controller" in text:
        text += "; is slurmctld up and SLURM_CONF right?"
    return text
