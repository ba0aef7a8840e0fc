#!/usr/bin/env python3
"""How much of Determined's `det` command tree pydet's `det` has.

    python3 scripts/cli_coverage.py --determined PATH/harness/determined/cli [--missing]

Determined declares its CLI as data: module-level trees of `Cmd(name, func, help, subs)`,
`Arg(*option_strings, **kwargs)`, `Group`, `ArgGroup` and `BoolOptArg` in
`harness/determined/cli/*.py`, with `det deploy` filled in by `harness/determined/deploy/`.
This script reads that source with `ast` and evaluates just enough of it (lists, `+`, `*`
splats, dict subscripts, imports between those modules and small helper functions such as
`make_pagination_args`) to rebuild the tree, without importing Determined. Anything it cannot
evaluate where a command or a flag is declared stops it with the file and line, so nothing
drops out of the count unnoticed.

It then walks pydet's own argparse parser (`pydet.cli.__main__.build_parser`) and matches
the two trees: a command is found when pydet has it under any of its names (aliases are the
same command), a flag when pydet's command accepts one of its option strings. Positional
arguments are not flags and are not counted. The flags of a missing command are missing.

Left out of the count, and listed as such: `det deploy aws|gcp|gke-experimental`, `det auth`,
`det oauth` and `det dev` (out of pydet's scope), and the `help` subcommands that
Determined's parser builder adds to every command with subcommands (they are not in the
declared trees). The totals are shown twice: over everything else, and without the command
groups other issues own (`workspace|project|model`, `notebook|shell|cmd`).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

# Paths (by Determined's main names) that are outside pydet's scope.
EXCLUDED: dict[tuple[str, ...], str] = {
    ("deploy", "aws"): "cloud deployment",
    ("deploy", "gcp"): "cloud deployment",
    ("deploy", "gke-experimental"): "cloud deployment",
    ("auth",): "SSO",
    ("oauth",): "OAuth",
    ("dev",): "developer tools",
}

# Command groups that other issues implement: the totals are also shown without them.
OTHER_ISSUES: dict[tuple[str, ...], str] = {
    ("workspace",): "workspace|project|model",
    ("project",): "workspace|project|model",
    ("model",): "workspace|project|model",
    ("notebook",): "notebook|shell|cmd",
    ("shell",): "notebook|shell|cmd",
    ("command",): "notebook|shell|cmd",
}

DECLARATIVE = "determined.cli._declarative_argparse"
SPEC_CLASSES = ("Cmd", "Arg", "Group", "ArgGroup", "BoolOptArg")


class Unsupported(Exception):
    """Source this evaluator cannot follow where a command or flag is declared."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")


class Unknown:
    """A value outside the command tree (a callable, a type, a computed default), with why
    it could not be followed, for the error if a command or a flag turns out to need it."""

    def __init__(self, why: str = "") -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"<unknown: {self.why}>" if self.why else "<unknown>"


UNKNOWN = Unknown()


# What Determined's declarative classes hold, as far as the count needs it.
@dataclasses.dataclass
class CmdSpec:
    spec: str  # "e|xperiment", "list ls"
    subs: list[Any]
    where: str


@dataclasses.dataclass
class ArgSpec:
    names: tuple[str, ...]


@dataclasses.dataclass
class GroupSpec:
    options: list[Any]


@dataclasses.dataclass(frozen=True)
class SpecClass:
    name: str


@dataclasses.dataclass
class Function:
    node: ast.FunctionDef
    module: Module


class Module:
    """One Determined module, executed statement by statement into a namespace."""

    def __init__(self, loader: Loader, name: str, path: Path | None) -> None:
        self.loader = loader
        self.name = name
        self.path = path
        self.names: dict[str, Any] = {}

    def attribute(self, attr: str) -> Any:
        if attr in self.names:
            return self.names[attr]
        sub = self.loader.load(f"{self.name}.{attr}")
        return sub if sub is not None else UNKNOWN

    def execute(self) -> None:
        if self.path is None:
            return
        tree = ast.parse(self.path.read_text(), str(self.path))
        for stmt in tree.body:
            self.statement(stmt)

    def where(self, node: ast.AST) -> str:
        return f"{self.path}:{getattr(node, 'lineno', '?')}"

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self.names[alias.asname] = self.loader.module_or_unknown(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    self.loader.module_or_unknown(alias.name)
                    self.names[top] = self.loader.module_or_unknown(top)
        elif isinstance(stmt, ast.ImportFrom):
            source = self.loader.module_or_unknown(stmt.module or "")
            for alias in stmt.names:
                value = source.attribute(alias.name) if isinstance(source, Module) else UNKNOWN
                self.names[alias.asname or alias.name] = value
        elif isinstance(stmt, ast.FunctionDef):
            self.names[stmt.name] = Function(stmt, self)
        elif isinstance(stmt, ast.ClassDef):
            special = self.name == DECLARATIVE and stmt.name in SPEC_CLASSES
            self.names[stmt.name] = SpecClass(stmt.name) if special else UNKNOWN
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            if stmt.value is None:
                return
            value = Evaluator(self, {}).expr(stmt.value)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                self.assign(target, value)
        elif isinstance(stmt, ast.Try):
            for inner in stmt.body:
                self.statement(inner)

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, ast.Attribute) and target.attr == "subs":
            # deploy/cli.py fills in the `det deploy` command declared in the top level.
            owner = Evaluator(self, {}).expr(target.value)
            if isinstance(owner, CmdSpec):
                owner.subs = _as_list(value, self.where(target))


class Loader:
    """Finds `determined.*` modules under the checkout's `harness/determined`; anything
    else (argparse, requests, determined.common) is opaque."""

    def __init__(self, determined_dir: Path) -> None:
        self.root = determined_dir  # .../harness/determined
        self.modules: dict[str, Module | None] = {}

    def _path(self, name: str) -> tuple[Path | None, bool]:
        parts = name.split(".")
        if parts[0] != "determined":
            return None, False
        base = self.root.joinpath(*parts[1:])
        if (base / "__init__.py").is_file():
            return base / "__init__.py", True
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py"), True
        return None, base.is_dir()

    def load(self, name: str) -> Module | None:
        if name in self.modules:
            return self.modules[name]
        if not (name == "determined" or name.startswith(("determined.cli", "determined.deploy"))):
            self.modules[name] = None
            return None
        path, exists = self._path(name)
        if not exists:
            self.modules[name] = None
            return None
        module = Module(self, name, path)
        self.modules[name] = module
        module.execute()
        return module

    def module_or_unknown(self, name: str) -> Module | Unknown:
        return self.load(name) or UNKNOWN


class Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class Evaluator:
    """Evaluates expressions in a module's namespace (and a function's locals)."""

    def __init__(self, module: Module, local: dict[str, Any]) -> None:
        self.module = module
        self.local = local

    def expr(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple):
            items: list[Any] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    items.extend(_as_list(self.expr(elt.value), self.module.where(elt)))
                else:
                    items.append(self.expr(elt))
            return items
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for key, value in zip(node.keys, node.values, strict=True):
                if key is not None:
                    out[self.expr(key)] = self.expr(value)
            return out
        if isinstance(node, ast.Name):
            if node.id in self.local:
                return self.local[node.id]
            return self.module.names.get(node.id, UNKNOWN)
        if isinstance(node, ast.Attribute):
            owner = self.expr(node.value)
            if isinstance(owner, Module):
                return owner.attribute(node.attr)
            if isinstance(owner, CmdSpec) and node.attr == "subs":
                return owner.subs
            return UNKNOWN
        if isinstance(node, ast.Subscript):
            owner = self.expr(node.value)
            key = self.expr(node.slice)
            if isinstance(owner, dict) and not isinstance(key, Unknown):
                return owner.get(key, UNKNOWN)
            return UNKNOWN
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.expr(node.left), self.expr(node.right)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            return UNKNOWN
        if isinstance(node, ast.Call):
            return self.call(node)
        return UNKNOWN

    def call(self, node: ast.Call) -> Any:
        func = self.expr(node.func)
        if not isinstance(func, SpecClass | Function):
            return UNKNOWN
        where = self.module.where(node)
        args: list[Any] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                args.extend(_as_list(self.expr(arg.value), where))
            else:
                args.append(self.expr(arg))
        kwargs = {kw.arg: self.expr(kw.value) for kw in node.keywords if kw.arg is not None}
        if isinstance(func, Function):
            return call_function(func, args, kwargs, where)
        return construct(func.name, args, kwargs, where)


def construct(cls: str, args: list[Any], kwargs: dict[str, Any], where: str) -> Any:
    if cls == "Cmd":
        params = dict(zip(("name", "func", "help_str", "subs"), args, strict=False)) | kwargs
        name, subs = params.get("name"), params.get("subs")
        if not isinstance(name, str):
            raise Unsupported(where, "a Cmd whose name is not a literal")
        return CmdSpec(name, _as_list(subs, where), where)
    if cls == "Arg":
        if not args or not all(isinstance(a, str) for a in args):
            raise Unsupported(where, "an Arg whose names are not literals")
        return ArgSpec(tuple(args))
    if cls == "Group":
        return GroupSpec(list(args))
    if cls == "ArgGroup":
        params = dict(zip(("title", "description", "child_args"), args, strict=False)) | kwargs
        return GroupSpec(_as_list(params.get("child_args") or [], where))
    # BoolOptArg(true_name, false_name, dest, ...): two flags.
    params = dict(zip(("true_name", "false_name"), args, strict=False)) | kwargs
    names = (params.get("true_name"), params.get("false_name"))
    if not all(isinstance(n, str) for n in names):
        raise Unsupported(where, "a BoolOptArg whose names are not literals")
    return GroupSpec([ArgSpec((str(names[0]),)), ArgSpec((str(names[1]),))])


def call_function(func: Function, args: list[Any], kwargs: dict[str, Any], where: str) -> Any:
    """Runs a small helper (`make_pagination_args`, `experiment_id_arg`): assignments, `+=`,
    `if` on known values and `return`."""
    fn = func.node
    params = [*fn.args.posonlyargs, *fn.args.args]
    local: dict[str, Any] = {}
    defaults = fn.args.defaults
    outer = Evaluator(func.module, {})
    for i, param in enumerate(params):
        d = i - (len(params) - len(defaults))
        local[param.arg] = outer.expr(defaults[d]) if d >= 0 else UNKNOWN
    for param, default in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True):
        local[param.arg] = outer.expr(default) if default is not None else UNKNOWN
    for param, value in zip(params, args, strict=False):
        local[param.arg] = value
    local.update(kwargs)
    ev = Evaluator(func.module, local)
    try:
        _run(ev, fn.body, f"{where} -> {func.module.where(fn)}")
    except Return as r:
        return r.value
    except Unsupported as e:
        # Most calls in a declaration make its `func` (`patch_agent(True)`): that is no
        # error unless the value ends up where a command or a flag is expected.
        return Unknown(str(e))
    return None


def _run(ev: Evaluator, body: Sequence[ast.stmt], where: str) -> None:
    for stmt in body:
        if isinstance(stmt, ast.Expr):
            continue
        if isinstance(stmt, ast.Return):
            raise Return(ev.expr(stmt.value) if stmt.value else None)
        names = [t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)]
        if isinstance(stmt, ast.Assign) and len(names) == len(stmt.targets):
            value = ev.expr(stmt.value)
            ev.local.update(dict.fromkeys(names, value))
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            left, right = ev.local.get(stmt.target.id, UNKNOWN), ev.expr(stmt.value)
            ok = isinstance(stmt.op, ast.Add) and isinstance(left, list)
            ev.local[stmt.target.id] = left + right if ok and isinstance(right, list) else UNKNOWN
        elif isinstance(stmt, ast.If):
            test = ev.expr(stmt.test)
            if isinstance(test, Unknown):
                # Only a guard that raises may stay undecided (`if x not in CHOICES: raise`).
                if all(isinstance(s, ast.Raise) for s in stmt.body) and not stmt.orelse:
                    continue
                raise Unsupported(where, f"an `if` it cannot decide (line {stmt.lineno})")
            _run(ev, stmt.body if test else stmt.orelse, where)
        else:
            raise Unsupported(where, f"a {type(stmt).__name__} statement (line {stmt.lineno})")


def _as_list(value: Any, where: str) -> list[Any]:
    if isinstance(value, list):
        return value
    raise Unsupported(where, f"expected a list of commands and arguments, got {value!r}")


# The tree both sides are reduced to.
@dataclasses.dataclass
class Node:
    names: list[str]  # the main name first, then the aliases
    flags: list[tuple[str, ...]] = dataclasses.field(default_factory=list)
    children: list[Node] = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return self.names[0]


def _aliases(spec: str) -> list[str]:
    """Determined's `generate_aliases`: "e|xperiment" -> experiment, e; "list ls" -> list, ls."""
    names: list[str] = []
    for word in spec.split():
        parts = word.split("|")
        names += ["".join(parts[: i + 1]) for i in range(len(parts))]
    main = "".join(spec.split()[0].split("|"))
    return [main] + [n for n in names if n != main]


def _flags_of(item: Any, where: str) -> Iterator[tuple[str, ...]]:
    if isinstance(item, ArgSpec):
        if item.names[0].startswith("-"):
            yield item.names
    elif isinstance(item, GroupSpec):
        for option in item.options:
            yield from _flags_of(option, where)
    elif not isinstance(item, CmdSpec):
        raise Unsupported(where, f"{item!r} in a command's arguments")


def determined_tree(items: list[Any], names: list[str], where: str) -> Node:
    node = Node(names)
    for item in items:
        if isinstance(item, CmdSpec):
            node.children.append(determined_tree(item.subs, _aliases(item.spec), item.where))
        else:
            node.flags.extend(_flags_of(item, where))
    return node


def load_determined(cli_dir: Path) -> Node:
    loader = Loader(cli_dir.resolve().parent)
    cli = loader.load("determined.cli.cli")
    if cli is None:
        raise SystemExit(f"no Determined CLI at {cli_dir} (expected cli.py there)")
    loader.load("determined.deploy.cli")  # fills in `det deploy`
    top = _as_list(cli.names.get("all_args_description"), str(cli.path))
    return determined_tree(top, ["det"], str(cli.path))


def pydet_tree() -> Node:
    sys.path[:0] = [str(REPO / "harness"), str(REPO)]
    from pydet.cli.__main__ import build_parser

    return parser_tree(build_parser(), ["det"])


def parser_tree(parser: argparse.ArgumentParser, names: list[str]) -> Node:
    node = Node(names)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            by_parser: dict[int, tuple[argparse.ArgumentParser, list[str]]] = {}
            for name, sub in action.choices.items():
                by_parser.setdefault(id(sub), (sub, []))[1].append(name)
            for sub, sub_names in by_parser.values():
                node.children.append(parser_tree(sub, sub_names))
        elif action.option_strings and not isinstance(action, argparse._HelpAction):
            node.flags.append(tuple(action.option_strings))
    return node


@dataclasses.dataclass
class Row:
    path: tuple[str, ...]  # Determined's main names
    found: bool
    flags: list[tuple[tuple[str, ...], bool]]
    group: str  # "" or what it is excluded as / which issue owns it
    excluded: bool


def compare(det: Node, ours: Node | None, path: tuple[str, ...] = ()) -> Iterator[Row]:
    """One row per Determined command (the root `det` included for its global flags)."""
    excluded = next((why for p, why in EXCLUDED.items() if path[: len(p)] == p), "")
    other = next((why for p, why in OTHER_ISSUES.items() if path[: len(p)] == p), "")
    if ours is not None:
        theirs = {s for names in ours.flags for s in names}
        flags = [(f, any(s in theirs for s in _matching_names(f))) for f in det.flags]
    else:
        flags = [(f, False) for f in det.flags]
    yield Row(path, ours is not None, flags, excluded or other, bool(excluded))
    for child in det.children:
        match = None
        if ours is not None:
            match = next((c for c in ours.children if set(c.names) & set(child.names)), None)
        yield from compare(child, match, (*path, child.name))


def _matching_names(flag: tuple[str, ...]) -> tuple[str, ...]:
    """A flag is matched on its long names; one that has only short names, on those."""
    longs = tuple(s for s in flag if s.startswith("--"))
    return longs or flag


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "n/a"


def report(rows: list[Row], *, missing_only: bool) -> None:
    counted = [r for r in rows if not r.excluded]
    for r in counted:
        if not r.path:
            label = "det (global flags)"
        else:
            label = "det " + " ".join(r.path)
        missing = [f for f, ok in r.flags if not ok]
        if missing_only and r.found and not missing:
            continue
        mark = "ok " if r.found else "-- "
        note = f"  [{r.group}]" if r.group else ""
        print(f"{mark}{label}{note}")
        for flag, ok in r.flags:
            if not (ok and missing_only):
                print(f"      {'ok' if ok else '--'} {'/'.join(flag)}")
    print()
    print("Left out of the count:")
    for r in rows:
        if r.excluded and r.path and r.path[:-1] not in {x.path for x in rows if x.excluded}:
            print(f"  det {' '.join(r.path)} ({r.group})")
    print("  the `help` subcommands Determined's parser builder adds (not declared)")
    print()
    groups = sorted(set(OTHER_ISSUES.values()))
    _totals("All of Determined's det (but the parts left out):", counted)
    _totals(
        f"Without {', '.join(groups)}:",
        [r for r in counted if not r.group],
    )


def _totals(title: str, rows: list[Row]) -> None:
    commands = [r for r in rows if r.path]
    found = sum(r.found for r in commands)
    flags = [ok for r in rows for _, ok in r.flags]
    print(title)
    print(f"  commands: {found}/{len(commands)} = {_pct(found, len(commands))}")
    print(f"  flags:    {sum(flags)}/{len(flags)} = {_pct(sum(flags), len(flags))}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--determined",
        required=True,
        type=Path,
        metavar="PATH",
        help="a Determined checkout's harness/determined/cli directory",
    )
    parser.add_argument(
        "--missing", action="store_true", help="list only what pydet lacks, then the totals"
    )
    args = parser.parse_args(argv)
    try:
        det = load_determined(args.determined)
    except Unsupported as e:
        print(f"cli_coverage: cannot read Determined's CLI: {e}", file=sys.stderr)
        return 1
    report(list(compare(det, pydet_tree())), missing_only=args.missing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
