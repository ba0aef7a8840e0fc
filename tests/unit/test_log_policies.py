"""The master compiles an experiment's log policies with RE2, within bounds, once."""

from __future__ import annotations

import time

import pytest

from determined.common import errors
from determined.common.expconf import LogPolicy, Signal
from pydet.master.experiments.log_policies import MAX_PATTERN, MAX_POLICIES, compile_policies


def test_a_policy_labels_with_its_signal_else_its_name() -> None:
    signal, named, bare = compile_policies(
        [
            LogPolicy("CUDA out of memory", name="OOM", actions=(Signal("gpu_oom"),)),
            LogPolicy("ECC", name="bad gpu", actions=("exclude_node",)),
            LogPolicy("corrupt", actions=("cancel_retries",)),
        ]
    )
    assert signal.label == "gpu_oom" and named.label == "bad gpu" and bare.label is None
    assert named.excludes_node and not named.cancels_retries
    assert bare.cancels_retries and not bare.excludes_node
    assert signal.regex.search("RuntimeError: CUDA out of memory.") is not None


def test_patterns_are_bounded_in_number_and_length_with_the_field_named() -> None:
    with pytest.raises(errors.InvalidArgument, match="at most 64"):
        compile_policies([LogPolicy(f"p{i}") for i in range(MAX_POLICIES + 1)])
    with pytest.raises(errors.InvalidArgument, match=r"log_policies\[1\]\.pattern: longer"):
        compile_policies([LogPolicy("ok"), LogPolicy("x" * (MAX_PATTERN + 1))])


def test_a_pattern_only_a_backtracking_engine_runs_is_refused() -> None:
    with pytest.raises(errors.InvalidArgument, match=r"log_policies\[0\]\.pattern: .*RE2"):
        compile_policies([LogPolicy(r"(\w+) \1")])


def test_a_catastrophic_pattern_for_python_re_matches_a_long_line_at_once() -> None:
    (p,) = compile_policies([LogPolicy("(a+)+$")])
    start = time.monotonic()
    assert p.regex.search("a" * 10_000 + "!") is None  # Python's re would not finish
    assert time.monotonic() - start < 1.0


def test_a_dot_star_literal_pattern_matches_as_its_regex_does() -> None:
    lines = [
        "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB",
        "cuda out of memory",  # patterns are case-sensitive
        "uncorrectable ECC error encountered on GPU 3",
        "",
        "CUDA out of memor",
    ]
    patterns = [".*CUDA out of memory.*", ".*uncorrectable ECC error encountered.*", ".*a.b.*"]
    for policy in compile_policies([LogPolicy(p) for p in patterns]):
        for line in lines:
            assert policy.matches(line) == (policy.regex.search(line) is not None), line
    cuda, ecc, dotted = compile_policies([LogPolicy(p) for p in patterns])
    assert cuda.literal == "CUDA out of memory" and ecc.literal is not None
    assert dotted.literal is None  # its "." is a metacharacter: the regex decides
