"""Log policies that act: each line a trial's processes write is matched against its
experiment's ``log_policies``, and a match

- ``{signal: NAME}`` (or a policy's ``name``): labels the trial (Determined's
  ``log_signal``), shown by ``det trial describe`` / ``det experiment list-trials``;
- ``cancel_retries``: a failure of the run whose lines matched is final (no restart);
- ``exclude_node``: the trial's restarts are not placed on the agent where it matched.

Patterns are users' input run by the master on every line, so they are compiled with RE2,
whose matching time is linear in the line (Python's ``re`` can take exponential time on a
pattern like ``(a+)+$``, freezing the master). Each experiment's patterns are compiled
once; their number and length are bounded when the experiment is created, and only the
first ``MAX_LINE`` characters of a line, from the task's own processes, are looked at.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from determined.common import errors, expconf
from pydet.master.experiments.experiment_store import ExperimentStore
from pydet.master.experiments.live import LiveExperiments
from pydet.master.logs.log_store import LogLine
from pydet.master.tasks.task_list import TaskList

log = logging.getLogger(__name__)

MAX_POLICIES = 64
MAX_PATTERN = 1024
MAX_LINE = 16 * 1024
_CACHED_EXPERIMENTS = 10_000


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # errors are reported to the user, not to the master's stderr
    return options


_OPTIONS = _options()


# ``.*TEXT.*`` with no other metacharacter in TEXT: Determined's default policies have this
# form, and every experiment has them, so they are a substring test (0.1 µs a line, not 3).
_LITERAL = re2.compile(r"\.\*([^\\.^$|?*+()\[\]{}]+)\.\*", options=_OPTIONS)


@dataclass(frozen=True)
class Compiled:
    regex: Any  # re2._Regexp
    label: str | None
    cancels_retries: bool
    excludes_node: bool
    literal: str | None = None

    def matches(self, text: str) -> bool:
        if self.literal is not None:
            return self.literal in text
        return self.regex.search(text) is not None


def compile_policies(policies: Sequence[expconf.LogPolicy]) -> tuple[Compiled, ...]:
    """The policies that can act, compiled; InvalidArgument names the field at fault."""
    if len(policies) > MAX_POLICIES:
        raise errors.InvalidArgument(
            f"log_policies: {len(policies)} policies; at most {MAX_POLICIES} are allowed"
        )
    compiled = []
    for i, p in enumerate(policies):
        if p.pattern is None:
            continue  # a name alone (a master default being overridden) matches nothing
        where = f"log_policies[{i}].pattern"
        if len(p.pattern) > MAX_PATTERN:
            raise errors.InvalidArgument(f"{where}: longer than {MAX_PATTERN} characters")
        try:
            regex = re2.compile(p.pattern, options=_OPTIONS)
        except re2.error as e:
            reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
            raise errors.InvalidArgument(
                f"{where}: {p.pattern!r} is not a pattern RE2 accepts ({reason}); "
                "backreferences and lookaround are not supported"
            ) from None
        signals = [a.signal for a in p.actions if isinstance(a, expconf.Signal)]
        compiled.append(
            Compiled(
                regex=regex,
                label=signals[0] if signals else p.name,
                cancels_retries=p.cancels_retries,
                excludes_node=p.excludes_node,
                literal=literal.group(1) if (literal := _LITERAL.fullmatch(p.pattern)) else None,
            )
        )
    return tuple(compiled)


class LogPolicyWatch:
    """Applies an experiment's log policies to its trials' lines as they arrive."""

    def __init__(self, live: LiveExperiments, tasks: TaskList, store: ExperimentStore) -> None:
        self._live = live
        self._tasks = tasks
        self._store = store
        self._compiled: dict[int, tuple[Compiled, ...]] = {}

    def _policies(
        self, experiment_id: int, config: expconf.ExperimentConfig
    ) -> tuple[Compiled, ...]:
        found = self._compiled.get(experiment_id)
        if found is None:
            if len(self._compiled) >= _CACHED_EXPERIMENTS:
                self._compiled.clear()
            try:
                found = compile_policies(config.log_policies)
            except errors.InvalidArgument as e:
                # Stored before the checks existed: its policies are not applied.
                log.warning("experiment %d: log policies not applied: %s", experiment_id, e)
                found = ()
            self._compiled[experiment_id] = found
        return found

    async def observe(self, lines: Sequence[LogLine]) -> None:
        for line in lines:
            if line.trial_id is None or not line.container_id:
                continue  # only the task's own processes, not the master's notes
            found = self._live.trial(line.trial_id)
            if found is None:
                continue
            exp, trial = found
            policies = self._policies(exp.id, exp.config)
            if not policies:
                continue
            # Lines of an earlier run, arriving late, label the trial but steer nothing.
            current = self._tasks.allocation_of(trial.task_id)
            this_run = current is not None and current.id == line.allocation_id
            text = line.text[:MAX_LINE]
            labeled = False  # the first matching policy labels: the user's come before defaults
            for p in policies:
                if not p.matches(text):
                    continue
                changed = False
                if p.label is not None and not labeled:
                    labeled = True
                    if trial.log_signal != p.label:
                        trial.log_signal = p.label
                        changed = True
                if this_run and p.cancels_retries and not trial.retries_canceled:
                    trial.cancel_retries_run = trial.run_id
                    log.info("trial %d: a log policy cancels its retries", trial.id)
                    changed = True
                if this_run and p.excludes_node and line.agent_id not in trial.excluded_agents:
                    trial.excluded_agents |= {line.agent_id}
                    log.info("trial %d: a log policy excludes agent %s", trial.id, line.agent_id)
                    changed = True
                if changed:
                    # Stored at once: a master restarted before the run ends still knows.
                    await self._store.save_log_policy_effects(trial)
