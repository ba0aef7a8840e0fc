"""Log policies: regular expressions matched against a trial's log lines, and what a match does.

A policy has a ``pattern`` (a regular expression searched for in each line), an optional
``name`` (the label a matching trial gets) and ``actions``: ``cancel_retries`` (a failure after
the match is final, ``max_restarts`` notwithstanding), ``exclude_node`` (the restarted trial
avoids the agent it failed on) and ``{signal: NAME}`` (a label of its own).

Determined's older forms, ``action: cancel_retries`` and ``action: {type: cancel_retries}``,
are read too and turned into the newer one. Policies with the same name and pattern are one
policy: their actions are pooled, once each. The master's own policies come first, then the
user's (see ``merge_log_policies``), and Determined's two defaults (CUDA OOM, ECC Error)
follow unless a policy uses their names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from determined.common.expconf._reader import Problems, Section, as_list, as_str, describe, index

CANCEL_RETRIES = "cancel_retries"
EXCLUDE_NODE = "exclude_node"
_NAMED_ACTIONS = (CANCEL_RETRIES, EXCLUDE_NODE)
_ACTION_FORMS = "cancel_retries, exclude_node or a mapping with a single key, signal"


@dataclass(frozen=True, order=True)
class Signal:
    """A ``{signal: NAME}`` action: a match marks the trial with ``NAME``."""

    signal: str


LogAction: TypeAlias = "str | Signal"


@dataclass(frozen=True)
class LogPolicy:
    pattern: str | None
    name: str | None = None
    actions: tuple[LogAction, ...] = ()

    @property
    def regex(self) -> re.Pattern[str] | None:
        return None if self.pattern is None else re.compile(self.pattern)

    @property
    def cancels_retries(self) -> bool:
        return CANCEL_RETRIES in self.actions

    @property
    def excludes_node(self) -> bool:
        return EXCLUDE_NODE in self.actions

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        out["pattern"] = self.pattern
        out["actions"] = [a if isinstance(a, str) else {"signal": a.signal} for a in self.actions]
        return out


def _canonical(actions: Iterable[LogAction]) -> tuple[LogAction, ...]:
    """Each action once, named ones first in a fixed order, so that pooling is order-free."""
    pooled = set(actions)
    named = [a for a in _NAMED_ACTIONS if a in pooled]
    signals = sorted(a for a in pooled if isinstance(a, Signal))
    return (*named, *signals)


def _action(problems: Problems, path: str, value: Any) -> LogAction | None:
    if isinstance(value, str) and value in _NAMED_ACTIONS:
        return value
    if isinstance(value, Mapping) and list(value) == ["signal"]:
        signal = as_str(problems, f"{path}.signal", value["signal"], non_empty=True)
        return None if signal is None else Signal(signal)
    problems.add(path, f"expected {_ACTION_FORMS}; got {describe(value)}")
    return None


def _legacy(problems: Problems, path: str, value: Any) -> LogAction | None:
    """Determined's forms before ``actions``: ``action: cancel_retries`` (0.38) and
    ``action: {type: cancel_retries}``."""
    if isinstance(value, str):
        if value not in _NAMED_ACTIONS:
            problems.add(path, f"expected one of {', '.join(_NAMED_ACTIONS)}, got {value!r}")
            return None
        return value
    sec = Section(problems, path, value)
    kind = sec.required_choice("type", _NAMED_ACTIONS)
    sec.finish()
    return kind


def _pattern(problems: Problems, path: str, value: Any) -> str | None:
    text = as_str(problems, path, value, non_empty=True)
    if text is None:
        return None
    try:
        re.compile(text)
    except re.error as e:
        problems.add(path, f"not a valid regular expression: {e}")
        return None
    return text


def _policy(problems: Problems, path: str, value: Any) -> LogPolicy | None:
    sec = Section(problems, path, value)
    name = sec.string("name", None, non_empty=True)
    pattern = sec.get("pattern", None, lambda p, v: _pattern(problems, p, v))
    if not sec.has("pattern") and not sec.has("name"):
        problems.add(sec.at("pattern"), "required")
    actions: list[LogAction] = []
    if sec.has("action") and sec.has("actions"):
        problems.add(
            path, "both action (Determined's older form) and actions are set; keep only actions"
        )
    items = sec.get("actions", None, lambda p, v: as_list(problems, p, v))
    for i, item in enumerate(items or ()):
        action = _action(problems, index(sec.at("actions"), i), item)
        if action is not None:
            actions.append(action)
    if sec.has("action"):
        legacy = _legacy(problems, sec.at("action"), sec.raw("action"))
        if legacy is not None:
            actions.append(legacy)
    sec.finish()
    if pattern is None and name is None:
        return None
    return LogPolicy(pattern=pattern, name=name, actions=_canonical(actions))


def pool_log_policies(policies: Iterable[LogPolicy]) -> tuple[LogPolicy, ...]:
    """One policy per (name, pattern), in order of first appearance, actions pooled."""
    pooled: dict[tuple[str | None, str | None], list[LogAction]] = {}
    for policy in policies:
        pooled.setdefault((policy.name, policy.pattern), []).extend(policy.actions)
    return tuple(
        LogPolicy(pattern=pattern, name=name, actions=_canonical(actions))
        for (name, pattern), actions in pooled.items()
    )


# Determined's default policies (expconf's LogPoliciesConfigV0.WithDefaults): every experiment
# has them unless its own policies use their names; ``- name: CUDA OOM`` alone turns one off.
DEFAULT_POLICIES = (
    LogPolicy(pattern=".*CUDA out of memory.*", name="CUDA OOM"),
    LogPolicy(pattern=".*uncorrectable ECC error encountered.*", name="ECC Error"),
)


def with_default_policies(policies: Iterable[LogPolicy]) -> tuple[LogPolicy, ...]:
    """``policies`` followed by Determined's defaults whose names they do not use."""
    mine = tuple(policies)
    names = {p.name for p in mine}
    return (*mine, *(d for d in DEFAULT_POLICIES if d.name not in names))


def parse_log_policies(problems: Problems, path: str, value: Any) -> tuple[LogPolicy, ...]:
    if value is None:
        return DEFAULT_POLICIES
    items = as_list(problems, path, value)
    if items is None:
        return DEFAULT_POLICIES
    found = [_policy(problems, index(path, i), item) for i, item in enumerate(items)]
    return with_default_policies(pool_log_policies(p for p in found if p is not None))


def merge_log_policies(user: Any, default: Any) -> Any:
    """The master's policies followed by the user's, as raw config lists (for ``_merge``).

    Pooling (same name and pattern → one policy) happens when the merged list is parsed.
    """
    if not isinstance(user, list) or not isinstance(default, list):
        return user
    return [*default, *user]
