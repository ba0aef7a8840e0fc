"""How the CLI shows things: tables, JSON, times, states and log lines.

Every command prints through here so that `det` looks the same everywhere (Determined's
"presto" tables, local wall-clock times) and so that `--json` output is stable for scripts:
states are plain names ("COMPLETED"), JSON-in-a-string fields are decoded into objects.
"""

from __future__ import annotations

import csv as _csv
import datetime
import enum
import io
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import betterproto2

# tabulate ships no type hints (no py.typed); its one function is wrapped below.
from tabulate import tabulate  # type: ignore[import-untyped]

from determined.api.gen import v1
from determined.common import checkpoint_info, errors, structs

# Proto fields that carry a JSON document as a string; --json output inlines them.
_JSON_STRING_FIELDS = frozenset(
    {"hparams", "latest_validation", "metadata", "storage", "metrics", "batch_metrics", "config"}
)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A table in Determined's look (`ID | Name | State`)."""
    # disable_numparse: ids and hyperparameters are shown as sent, not re-formatted as floats.
    text = tabulate(list(rows), headers=list(headers), tablefmt="presto", disable_numparse=True)
    return str(text)


def csv(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The same rows as CSV (`--csv`), a header line first."""
    out = io.StringIO()
    writer = _csv.writer(out, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return out.getvalue()


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False)


Time = float | datetime.datetime | None


def seconds(when: Time) -> float:
    """A time as seconds since the epoch: API messages hold datetimes, task messages floats."""
    if isinstance(when, datetime.datetime):
        return when.timestamp()
    return when or 0.0


def local_time(when: Time) -> str:
    """A time as local `YYYY-MM-DD HH:MM:SS`; "" for unset (0 or None)."""
    since_epoch = seconds(when)
    if not since_epoch:
        return ""
    return datetime.datetime.fromtimestamp(since_epoch).strftime("%Y-%m-%d %H:%M:%S")


def iso_utc(when: Time) -> str:
    """Log timestamps: ISO 8601 in UTC, like Determined's `det trial logs`."""
    utc = datetime.datetime.fromtimestamp(seconds(when), tz=datetime.UTC)
    return utc.isoformat(timespec="microseconds").replace("+00:00", "Z")


def state_name(state: Any) -> str:
    """`v1.State.COMPLETED` -> "COMPLETED"; a value this CLI does not know stays visible."""
    if isinstance(state, enum.Enum) and state.name:
        return str(state.name)
    # betterproto2 keeps an unknown number as a nameless member; show it as UNKNOWN(n).
    return str(state)


def percent(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def optional_number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def compact_json(value: str | betterproto2.Message | None) -> str:
    """A JSON document (a string field, or a Struct) on one line with spaces
    (hyperparameters in a table cell)."""
    if isinstance(value, betterproto2.Message):
        return json.dumps(_plain(value), separators=(", ", ": "))
    if not value:
        return ""
    try:
        return json.dumps(json.loads(value), separators=(", ", ": "))
    except ValueError:
        return value


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def message_dict(message: betterproto2.Message) -> dict[str, Any]:
    """A proto message as plain JSON-ready data, every field present, snake_case keys;
    times in RFC 3339, a Struct as its object."""
    cls: Any = type(message)
    return {
        name.rstrip("_"): _plain(getattr(message, name), name)
        for name in cls._betterproto.meta_by_field_name
    }


def proto_json(message: betterproto2.Message) -> dict[str, Any]:
    """A message with well-known types (a Struct, a Timestamp) in protobuf's JSON mapping,
    every field present, snake_case keys: times in RFC 3339, 64-bit integers as strings."""
    raw: dict[str, Any] = message.to_dict(
        output_format=betterproto2.OutputFormat.PROTO_JSON,
        casing=betterproto2.Casing.SNAKE,
        include_default_values=True,
    )
    return raw


def _plain(value: Any, key: str = "") -> Any:
    if isinstance(value, datetime.datetime):
        # A Timestamp field: RFC 3339 in UTC, as Determined's JSON has it.
        return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, betterproto2.Message):
        if type(value).__name__ == "Struct":
            return structs.python(value)  # type: ignore[arg-type]
        return message_dict(value)
    if isinstance(value, enum.Enum):
        return state_name(value)
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(k): _plain(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if key in _JSON_STRING_FIELDS and isinstance(value, str):
        if not value:
            return None
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# Column sets shared by several commands.

# Determined's `det experiment list` columns.
EXPERIMENT_HEADERS = (
    "ID",
    "Owner",
    "Name",
    "Parent ID",
    "State",
    "Progress",
    "Started",
    "Ended",
    "Resource Pool",
)


def experiment_row(e: v1.Experiment) -> list[Any]:
    return [
        e.id,
        e.username,
        e.name,
        e.forked_from or "",
        state_name(e.state),
        percent(e.progress or 0.0),
        local_time(e.start_time),
        local_time(e.end_time),
        # An unmanaged run is in no pool: a script off the cluster reports it.
        "(unmanaged)" if e.unmanaged else e.resource_pool,
    ]


TRIAL_HEADERS = (
    "Trial ID",
    "State",
    "Phase",
    "H-Params",
    "Steps",
    "Restarts",
    "Best Validation",
    "Log Signal",
    "Start",
    "End",
)


def trial_row(t: v1.Trial) -> list[Any]:
    return [
        t.id,
        state_name(t.state),
        state_name(t.phase),
        compact_json(t.hparams),
        t.total_batches_processed,
        t.restarts,
        optional_number(t.best_validation_metric),
        t.log_policy_matched or "",
        local_time(t.start_time),
        local_time(t.end_time),
    ]


# Determined's `det checkpoint list` / `det e list-checkpoints` columns (its "# of Batches"
# is the steps completed; Resources lists the files).
CHECKPOINT_HEADERS = (
    "Trial ID",
    "# of Batches",
    "State",
    "Validation Metric",
    "UUID",
    "Resources",
    "Size",
)


def checkpoint_row(c: v1.Checkpoint) -> list[Any]:
    return [
        checkpoint_info.trial_id(c),
        c.steps_completed,
        checkpoint_info.state(c),
        optional_number(checkpoint_info.searcher_metric(c)),
        c.uuid,
        "\n".join(sorted(c.resources)),
        human_bytes(c.size),
    ]


METRIC_HEADERS = ("Group", "Steps", "Reported", "Metrics")


def metric_row(r: v1.MetricReport) -> list[Any]:
    return [r.group, r.steps_completed, local_time(r.timestamp), compact_json(r.metrics)]


def log_line(log: v1.TaskLog) -> str:
    """One trial log line as Determined prints it: `[time] [rank=N] message`."""
    rank = "" if log.rank_id is None else f"[rank={log.rank_id}] "
    message = log.message.rstrip("\r\n")
    return f"[{iso_utc(log.timestamp)}] {rank}{message}"


def master_log_line(e: v1.LogEntry) -> str:
    """A line of the master's own log as Determined's `det master logs` prints it."""
    return f"{iso_utc(e.timestamp)} [{e.level}]: {e.message}"


def confirmed(what: str, question: str) -> bool:
    """A yes from the terminal to ``question``; without a terminal (a script), an error
    saying that ``what`` needs --yes."""
    if not sys.stdin.isatty():
        raise errors.InvalidArgument(f"{what} needs confirmation; pass --yes to confirm")
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def objects(keys: Sequence[str], items: Iterable[Mapping[str, Any]]) -> str:
    """Rows of ``keys`` from each mapping, as Determined's ``render_objects`` shows them:
    a header per key (``groupId`` -> ``Groupid``, ``user_id`` -> ``User Id``), N/A for an
    absent value."""
    headers = [key.replace("_", " ").title() for key in keys]
    rows = [["N/A" if item.get(key) is None else item[key] for key in keys] for item in items]
    return table(headers, rows)


def to_yaml(value: Any) -> str:
    import yaml

    return str(yaml.safe_dump(value, default_flow_style=False, sort_keys=False))
