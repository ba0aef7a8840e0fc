"""Lists of numbers under 2**32 as base64 text (four bytes each, little-endian), for the
parts of a searcher's state that are saved at every event: as JSON lists of numbers they
cost the master more than the rest of the save together (the JSON encoder formats each
number on its own)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence


def pack(words: Sequence[int]) -> str:
    return base64.b64encode(struct.pack(f"<{len(words)}I", *words)).decode("ascii")


def unpack(text: str) -> tuple[int, ...]:
    packed = base64.b64decode(text)
    return struct.unpack(f"<{len(packed) // 4}I", packed)
