"""pydet's event-file writer against TensorBoard's own checksum, protobuf classes and reader."""

from __future__ import annotations

import io
import pathlib
import random

import pytest

from determined.core import _tfevents

tensorboard = pytest.importorskip("tensorboard")


def test_masked_crc32c_matches_tensorboards() -> None:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import (  # type: ignore[import-untyped]
        masked_crc32c,
    )

    rng = random.Random(7)
    samples = [b"", b"a", b"123456789", bytes(range(256))]
    samples += [rng.randbytes(rng.randrange(1, 300)) for _ in range(50)]
    for data in samples:
        assert _tfevents.masked_crc32c(data) == masked_crc32c(data), data
    # The check value of CRC-32C.
    assert _tfevents.crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize("step", [0, 1, 300, 2**40, -1])
def test_events_are_the_bytes_tensorboards_protobuf_classes_make(step: int) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2  # type: ignore[import-untyped]

    values = [("loss", 0.5), ("val_accuracy", 0.125), ("group/é", -3.0)]
    ours = _tfevents.scalars_event(1.5e9 + 0.25, step, values)
    theirs = event_pb2.Event(
        wall_time=1.5e9 + 0.25,
        step=step,
        summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values]
        ),
    )
    assert ours == theirs.SerializeToString(deterministic=True)
    version = event_pb2.Event(wall_time=2.0, file_version="brain.Event:2")
    assert _tfevents.version_event(2.0) == version.SerializeToString(deterministic=True)


def test_tensorboards_reader_reads_a_written_file(tmp_path: pathlib.Path) -> None:
    from tensorboard.backend.event_processing.event_file_loader import (  # type: ignore[import-untyped]
        RawEventFileLoader,
    )
    from tensorboard.compat.proto import event_pb2

    path = tmp_path / "events.out.tfevents.1.host.1"
    with open(path, "wb") as f:
        writer = _tfevents.EventFileWriter(f, 1.0)
        writer.write_scalars(2.0, 10, [("loss", 0.75)])
        writer.write_scalars(3.0, 20, [("loss", 0.5), ("val_loss", 0.625)])
        writer.flush()
    # The raw loader checks each record's framing and checksums; the events parse as protobuf.
    events = [event_pb2.Event.FromString(r) for r in RawEventFileLoader(str(path)).Load()]
    assert events[0].file_version == "brain.Event:2"
    got = [(e.step, v.tag, v.simple_value) for e in events[1:] for v in e.summary.value]
    assert got == [(10, "loss", 0.75), (20, "loss", 0.5), (20, "val_loss", 0.625)]


def test_a_record_frames_its_data_with_length_and_checksums() -> None:
    data = b"hello"
    framed = _tfevents.record(data)
    assert len(framed) == 8 + 4 + len(data) + 4
    assert framed[12:17] == data
    assert int.from_bytes(framed[:8], "little") == 5
    assert int.from_bytes(framed[-4:], "little") == _tfevents.masked_crc32c(data)
    assert io.BytesIO(framed).read(8) == (5).to_bytes(8, "little")
