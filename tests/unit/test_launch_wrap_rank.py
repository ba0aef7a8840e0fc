from __future__ import annotations

import pytest

from determined.launch.wrap_rank import MAX_LINE_BYTES, LinePrefixer, RankError, parse, resolve_rank


def test_rank_is_an_integer_or_the_first_set_variable() -> None:
    assert resolve_rank("3", {}) == 3
    assert resolve_rank("RANK", {"RANK": "5"}) == 5
    assert resolve_rank("HOROVOD_RANK,PMI_RANK", {"PMI_RANK": "2"}) == 2


@pytest.mark.parametrize("spec,env", [("RANK", {}), ("RANK", {"RANK": "x"}), ("-1", {})])
def test_unusable_ranks_are_errors(spec: str, env: dict[str, str]) -> None:
    with pytest.raises(RankError):
        resolve_rank(spec, env)


def test_separator_before_the_command_is_optional() -> None:
    assert parse(["0", "--", "echo", "--"]) == ("0", ["echo", "--"])
    assert parse(["0", "echo"]) == ("0", ["echo"])
    with pytest.raises(RankError):
        parse(["0", "--"])


def test_lines_are_prefixed_as_they_complete() -> None:
    p = LinePrefixer("[rank=1] ")
    assert p.feed(b"a\nb") == [b"[rank=1] a\n"]
    assert p.feed(b"c\n\n") == [b"[rank=1] bc\n", b"[rank=1] \n"]
    assert p.flush() == []


def test_carriage_returns_end_lines_but_crlf_is_one_end() -> None:
    p = LinePrefixer("> ")
    assert p.feed(b"10%\r20%\r") == [b"> 10%\n"]
    assert p.feed(b"\nnext\r\n") == [b"> 20%\n", b"> next\n"]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert LinePrefixer("").feed(b"\xffok\n") == ["\ufffdok\n".encode()]


def test_an_unterminated_last_line_is_flushed_with_a_newline() -> None:
    p = LinePrefixer("> ")
    assert p.feed(b"tail") == []
    assert p.flush() == [b"> tail\n"]


def test_very_long_lines_are_split() -> None:
    lines = LinePrefixer("").feed(b"x" * (MAX_LINE_BYTES + 10))
    assert lines == [b"x" * MAX_LINE_BYTES + b"\n"]
