"""The agent's slots: its NVIDIA GPUs, or artificial CPU slots.

GPUs are found with ``nvidia-smi`` when it is installed and no slot count was given;
otherwise the agent offers ``--slots N`` artificial slots (default 1, 0 allowed).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass

log = logging.getLogger(__name__)

NVIDIA_SMI_QUERY = ("--query-gpu=index,uuid,name", "--format=csv,noheader")
_NVIDIA_SMI_TIMEOUT = 30.0


@dataclass(frozen=True)
class SlotSpec:
    id: str
    type: str  # "cuda" or "cpu"
    device: str
    uuid: str = ""


def artificial(count: int) -> list[SlotSpec]:
    return [SlotSpec(id=str(i), type="cpu", device="cpu") for i in range(count)]


def parse_nvidia_smi(output: str) -> list[SlotSpec]:
    """Slots from ``nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader``."""
    slots = []
    for raw in output.splitlines():
        if not raw.strip():
            continue
        # The name may itself contain commas; index and uuid never do.
        parts = [p.strip() for p in raw.split(",", 2)]
        if len(parts) != 3 or not parts[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi output line: {raw!r}")
        index, uuid, name = parts
        slots.append(SlotSpec(id=index, type="cuda", device=name, uuid=uuid))
    return slots


def detect_gpus() -> list[SlotSpec] | None:
    """The GPUs nvidia-smi reports, or None when nvidia-smi is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run(
            [exe, *NVIDIA_SMI_QUERY],
            capture_output=True,
            text=True,
            timeout=_NVIDIA_SMI_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log.warning("nvidia-smi could not be run (%s); using artificial slots", e)
        return None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        log.warning(
            "nvidia-smi failed with exit code %d (%s); using artificial slots",
            proc.returncode,
            detail[-1] if detail else "no output",
        )
        return None
    try:
        return parse_nvidia_smi(proc.stdout)
    except ValueError as e:
        log.warning("%s; using artificial slots", e)
        return None


def detect(count: int | None) -> list[SlotSpec]:
    """``count`` artificial slots when given, else the GPUs, else one artificial slot."""
    if count is not None:
        return artificial(count)
    gpus = detect_gpus()
    if gpus:
        return gpus
    return artificial(1)
