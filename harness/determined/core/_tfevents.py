"""TensorBoard event files, written without importing TensorBoard.

An event file is a sequence of records: the data's length (8 bytes, little-endian), the
masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data. Each record's
data is an ``Event`` protocol buffer; the first says the file's version, the others carry
a step's scalars (``Event.summary.value[].simple_value``).

Written by hand because importing TensorBoard's own writer takes about 0.6 s (it loads its
TensorFlow stub), which every trial that reports metrics would pay when it ends. The bytes
are checked against TensorBoard's reader and its protobuf classes in
``tests/unit/test_tfevents.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import BinaryIO

from determined.common._protowire import _varint

FILE_VERSION = "brain.Event:2"


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as TFRecord files use it."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord: length, its checksum, the data, its checksum."""
    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def version_event(wall_time: float) -> bytes:
    """``Event(wall_time=..., file_version="brain.Event:2")``."""
    return b"\x09" + struct.pack("<d", wall_time) + _length_delimited(3, FILE_VERSION.encode())


def scalars_event(wall_time: float, step: int, values: Iterable[tuple[str, float]]) -> bytes:
    """``Event(wall_time, step, summary=Summary(value=[Value(tag, simple_value), ...]))``."""
    summary = b"".join(
        _length_delimited(1, _length_delimited(1, tag.encode()) + b"\x15" + struct.pack("<f", v))
        for tag, v in values
    )
    step_field = b"\x10" + _varint(step) if step else b""
    return b"\x09" + struct.pack("<d", wall_time) + step_field + _length_delimited(5, summary)


class EventFileWriter:
    """Appends events to an open binary file, starting with the version event."""

    def __init__(self, file: BinaryIO, wall_time: float) -> None:
        self._file = file
        file.write(record(version_event(wall_time)))

    def write_scalars(self, wall_time: float, step: int, values: list[tuple[str, float]]) -> None:
        self._file.write(record(scalars_event(wall_time, step, values)))

    def flush(self) -> None:
        self._file.flush()
