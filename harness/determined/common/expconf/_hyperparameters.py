"""Hyperparameter declarations: constants, ranges to search and nested groups of them."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from determined.common.expconf._reader import Problems, Section, as_json, describe, join

HP_TYPES = ("const", "int", "double", "log", "categorical")
RANGED_TYPES = ("int", "double", "log")


@dataclass(frozen=True)
class ConstHP:
    """A fixed value; a bare scalar or list in the config means this."""

    val: Any

    def to_dict(self) -> dict[str, Any]:
        return {"type": "const", "val": copy.deepcopy(self.val)}


@dataclass(frozen=True)
class IntHP:
    """An integer in ``[minval, maxval]``, both ends included; ``count`` is the grid size."""

    minval: int
    maxval: int
    count: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": "int", "minval": self.minval, "maxval": self.maxval, "count": self.count}


@dataclass(frozen=True)
class DoubleHP:
    """A real number in ``[minval, maxval]``; ``count`` is the grid size."""

    minval: float
    maxval: float
    count: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": "double", "minval": self.minval, "maxval": self.maxval, "count": self.count}


@dataclass(frozen=True)
class LogHP:
    """``base ** u`` for ``u`` in ``[minval, maxval]``, so that e.g. learning rates spread evenly
    across orders of magnitude."""

    base: float
    minval: float
    maxval: float
    count: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "log",
            "base": self.base,
            "minval": self.minval,
            "maxval": self.maxval,
            "count": self.count,
        }


@dataclass(frozen=True)
class CategoricalHP:
    """One of a fixed list of values."""

    vals: tuple[Any, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "categorical", "vals": copy.deepcopy(list(self.vals))}


Hyperparameter: TypeAlias = ConstHP | IntHP | DoubleHP | LogHP | CategoricalHP
HParamTree: TypeAlias = dict[str, "Hyperparameter | HParamTree"]


def hyperparameters_to_dict(tree: HParamTree) -> dict[str, Any]:
    return {
        name: hyperparameters_to_dict(hp) if isinstance(hp, dict) else hp.to_dict()
        for name, hp in tree.items()
    }


def flatten_hparams(tree: HParamTree) -> dict[tuple[str, ...], Hyperparameter]:
    """Lists every leaf under its path of names.

    Paths are tuples rather than dotted strings because a name may itself contain a dot. An
    empty group is a leaf of its own, the constant ``{}``: a trial's hparams have it as an
    empty mapping, as in Determined (code that reads ``hparams["actions"]`` expects it).
    """
    flat: dict[tuple[str, ...], Hyperparameter] = {}
    for name, hp in tree.items():
        if isinstance(hp, dict) and not hp:
            flat[(name,)] = ConstHP(val={})
        elif isinstance(hp, dict):
            for sub, leaf in flatten_hparams(hp).items():
                flat[(name, *sub)] = leaf
        else:
            flat[(name,)] = hp
    return flat


def unflatten_hparams(values: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    """Rebuilds the nested ``hparams`` a trial sees from values chosen per leaf path."""
    out: dict[str, Any] = {}
    for path, value in values.items():
        node = out
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = value
    return out


def parse_hyperparameters(problems: Problems, path: str, value: Any) -> HParamTree:
    """Reads a group of hyperparameters.

    A mapping with a ``type`` key declares one hyperparameter; any other mapping is a nested
    group; anything else (``null`` included) is a constant. A list is a constant too, but
    declarations written inside it are checked as Determined checks them.
    """
    tree: HParamTree = {}
    if value is None:
        return tree
    if not isinstance(value, Mapping):
        problems.add(path, f"expected a mapping, got {describe(value)}")
        return tree
    for name, item in value.items():
        if not isinstance(name, str):
            problems.add(path, f"names must be strings, got {describe(name)}")
            continue
        item_path = join(path, name)
        if isinstance(item, Mapping) and "type" not in item:
            tree[name] = parse_hyperparameters(problems, item_path, item)
        elif isinstance(item, Mapping):
            hp = _parse_typed(problems, item_path, item)
            if hp is not None:
                tree[name] = hp
        else:
            if isinstance(item, list | tuple):
                _check_listed(problems, item_path, item)
            tree[name] = ConstHP(as_json(problems, item_path, item))
    return tree


def _check_listed(problems: Problems, path: str, value: Any) -> None:
    """Reports mistakes in declarations inside a list (``[{type: categorical}]`` without
    ``vals``, say), at their place in it."""
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_listed(problems, f"{path}[{i}]", item)
    elif isinstance(value, Mapping) and "type" in value:
        _parse_typed(problems, path, value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_listed(problems, join(path, str(key)), item)


def _parse_typed(problems: Problems, path: str, value: Mapping[str, Any]) -> Hyperparameter | None:
    sec = Section(problems, path, value)
    kind = sec.required_choice("type", HP_TYPES)
    hp: Hyperparameter | None = None
    if kind is None:
        sec.skip_rest()
    elif kind == "const":
        if sec.present("val"):
            hp = ConstHP(sec.json("val"))
        else:
            problems.add(sec.at("val"), "required")
    elif kind == "categorical":
        hp = _categorical(sec)
    else:
        hp = _ranged(sec, kind)
    sec.finish()
    return hp


def _categorical(sec: Section) -> CategoricalHP | None:
    vals = sec.json("vals")
    if vals is None:
        sec.problems.add(sec.at("vals"), "required")
    elif not isinstance(vals, list):
        sec.problems.add(sec.at("vals"), f"expected a list, got {describe(vals)}")
    elif not vals:
        sec.problems.add(sec.at("vals"), "must not be empty")
    else:
        return CategoricalHP(tuple(vals))
    return None


def _ranged(sec: Section, kind: str) -> Hyperparameter | None:
    base = sec.number("base", 10.0, above=0) if kind == "log" else 10.0
    bounds: tuple[float | None, float | None]
    if kind == "int":
        bounds = (sec.required_integer("minval"), sec.required_integer("maxval"))
    else:
        bounds = (sec.required_number("minval"), sec.required_number("maxval"))
    count = sec.integer("count", None, minimum=1)
    minval, maxval = bounds
    if minval is None or maxval is None:
        return None
    if minval >= maxval:
        sec.problems.add(sec.at("minval"), "must be less than maxval")
        return None
    if kind == "int":
        return IntHP(int(minval), int(maxval), count)
    if kind == "double":
        return DoubleHP(minval, maxval, count)
    return LogHP(base, minval, maxval, count)
