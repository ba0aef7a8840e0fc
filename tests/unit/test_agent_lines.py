from __future__ import annotations

import pytest

from pydet.agent.lines import MAX_LINE_BYTES, LineSplitter


def test_complete_lines_come_out_without_their_newline() -> None:
    s = LineSplitter()
    assert s.feed(b"one\ntwo\r\nthr") == ["one", "two"]
    assert s.feed(b"ee\n\n") == ["three", ""]
    assert s.flush() == []


def test_a_trailing_partial_line_comes_out_at_flush() -> None:
    s = LineSplitter()
    assert s.feed(b"no newline") == []
    assert s.flush() == ["no newline"]
    assert s.flush() == []


def test_bytes_arriving_one_at_a_time_make_the_same_lines() -> None:
    s = LineSplitter()
    out: list[str] = []
    for b in b"alpha\nbeta\ngamma":
        out += s.feed(bytes([b]))
    assert out + s.flush() == ["alpha", "beta", "gamma"]


def test_long_lines_are_split_into_pieces_of_at_most_max_bytes() -> None:
    s = LineSplitter(max_bytes=10)
    assert s.feed(b"0123456789abcdefghijXY\nok\n") == ["0123456789", "abcdefghij", "XY", "ok"]
    assert s.feed(b"0123456789\n") == ["0123456789"]  # exactly max: one line


def test_long_lines_are_split_before_they_end() -> None:
    # A process that never prints a newline must not make the agent buffer without bound.
    s = LineSplitter(max_bytes=8)
    assert s.feed(b"x" * 20) == ["x" * 8, "x" * 8]
    assert s.flush() == ["xxxx"]


def test_splits_do_not_cut_a_utf8_character() -> None:
    s = LineSplitter(max_bytes=5)
    text = "ab€cd€"  # € is 3 bytes
    pieces = s.feed(text.encode() + b"\n")
    assert "".join(pieces) == text
    assert "\ufffd" not in "".join(pieces)
    assert all(len(p.encode()) <= 5 for p in pieces)


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    s = LineSplitter()
    assert s.feed(b"bad \xff\xfe byte\n") == ["bad \ufffd\ufffd byte"]


def test_default_limit_is_64_kib() -> None:
    assert MAX_LINE_BYTES == 65536
    s = LineSplitter()
    pieces = s.feed(b"z" * 150_000 + b"\n")
    assert [len(p) for p in pieces] == [65536, 65536, 150_000 - 2 * 65536]


def test_tiny_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        LineSplitter(max_bytes=2)
