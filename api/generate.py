"""Regenerate the Python bindings from api/proto: `python3 api/generate.py`.

The output, harness/determined/api/gen/, is committed; CI runs this and fails when git
sees a difference (`python3 api/generate.py --check`). Two outputs: betterproto2's ``v1``
package (the master, agent and CLI), and ``v1_schema.py``, the same messages, services and
enums as plain tables for ``determined.api.lite`` and the SDK, which use it because it
imports in a millisecond where ``v1`` takes a few hundred.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "api" / "proto"
OUT_DIR = ROOT / "harness" / "determined" / "api" / "gen"


def generate(out: pathlib.Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in PROTO_DIR.rglob("*.proto"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"--python_betterproto2_out={out}",
            "--python_betterproto2_opt=client_generation=async,server_generation=async",
            *protos,
        ],
        check=True,
        cwd=PROTO_DIR,
        capture_output=True,
    )
    descriptor_set = out / "v1.pb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"--descriptor_set_out={descriptor_set}",
            "--include_imports",
            *protos,
        ],
        check=True,
        cwd=PROTO_DIR,
        capture_output=True,
    )
    (out / "v1_schema.py").write_text(schema_source(descriptor_set.read_bytes()))
    descriptor_set.unlink()


_SCALAR_TYPES = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    6: "fixed64",
    7: "fixed32",
    8: "bool",
    9: "string",
    12: "bytes",
    13: "uint32",
    14: "enum",
    15: "sfixed32",
    16: "sfixed64",
    17: "sint32",
    18: "sint64",
}
_MESSAGE_TYPE = 11
_REPEATED = 3


def _type_of(field: Any, package: str) -> tuple[str, str | None]:
    """(kind, message name) of a field descriptor: a scalar kind, or ("message", name); a
    message of ``package`` by its own name, another (a well-known type) by its full name."""
    if field.type == _MESSAGE_TYPE:
        return "message", _message_name(field.type_name.lstrip("."), package)
    return _SCALAR_TYPES[field.type], None


def _message_name(full_name: str, package: str) -> str:
    return full_name.removeprefix(package + ".") if full_name.count(".") == 1 else full_name


def schema_source(descriptor_set: bytes) -> str:
    """``v1_schema.py``: every message's fields, every service's methods and every enum's
    members (a nested enum by betterproto2's name for it: ``JobType`` for ``Job.Type``), as
    literals."""
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
    # The well-known types (google/protobuf/*.proto) come in as imports: their messages are
    # in the tables by their full names, and only what the API's own files use.
    own = [f for f in files.file if not f.name.startswith("google/protobuf/")]
    package = {f.package for f in own}
    if len(package) != 1:
        raise SystemExit(f"expected one proto package, got {sorted(package)}")
    pkg = package.pop()
    messages: dict[str, list[tuple[Any, ...]]] = {}
    services: dict[str, list[tuple[str, str, str, bool, bool]]] = {}
    enums: dict[str, list[tuple[str, int]]] = {}
    for f in sorted(files.file, key=lambda f: (f not in own, f.name)):
        for e in f.enum_type:
            enums[_message_name(f"{f.package}.{e.name}", pkg)] = [
                (v.name, v.number) for v in e.value
            ]
        for m in f.message_type:
            entries = {e.name: e for e in m.nested_type if e.options.map_entry}
            if len(entries) != len(m.nested_type):
                raise SystemExit(f"{f.name}: nested messages in {m.name} are not supported")
            # A nested enum (GetModelsRequest.SortBy) by betterproto's name for it
            # (GetModelsRequestSortBy); fields name no enum type in these tables.
            for e in m.enum_type:
                enums[_message_name(f"{f.package}.{m.name}{e.name}", pkg)] = [
                    (v.name, v.number) for v in e.value
                ]
            fields = []
            for fd in m.field:
                kind, type_name = _type_of(fd, pkg)
                entry = entries.get((type_name or "").rsplit(".", 1)[-1])
                if entry is not None:
                    key, value = (_type_of(e, pkg) for e in entry.field)
                    fields.append((fd.name, fd.number, "map", (key[0], *value), False, False, ""))
                    continue
                # Presence: proto3 `optional` (a synthetic oneof) and real oneof members.
                oneof = ""
                if fd.HasField("oneof_index"):
                    name = m.oneof_decl[fd.oneof_index].name
                    oneof = "" if fd.proto3_optional else name
                    presence = True
                else:
                    presence = kind == "message"
                repeated = fd.label == _REPEATED
                fields.append((fd.name, fd.number, kind, type_name, repeated, presence, oneof))
            messages[_message_name(f"{f.package}.{m.name}", pkg)] = fields
        for svc in f.service:
            services[svc.name] = [
                (
                    meth.name,
                    meth.input_type.rsplit(".", 1)[-1],
                    meth.output_type.rsplit(".", 1)[-1],
                    meth.client_streaming,
                    meth.server_streaming,
                )
                for meth in svc.method
            ]
    used = _used_well_known(messages)
    messages = {k: v for k, v in messages.items() if "." not in k or k in used}
    enums = {k: v for k, v in enums.items() if "." not in k or k in used}
    # The tables are JSON text in the module, read by one json.loads: a task imports this
    # module twice per trial, and Python compiles (without a byte-code cache) and unmarshals
    # a string in well under a millisecond, where the same tables as tuple literals take
    # tens of milliseconds to compile and about ten to load.
    lines = [
        "# Generated by api/generate.py from api/proto. DO NOT EDIT.",
        '"""The ``v1`` messages, services and enums as tables, for ``determined.api.lite`` and',
        "the SDK.",
        "",
        "MESSAGES: name -> fields, each [name, number, kind, message type or None, repeated,",
        "has presence, oneof name or '']. SERVICES: name -> methods, each [name, request,",
        "response, client streaming, server streaming]. ENUMS: name -> members, each [name as",
        'in the .proto (``STATE_ACTIVE``), number]."""',
        "",
        "import json",
        "from typing import Any",
        "",
        f"PACKAGE = {pkg!r}",
        "",
        "MESSAGES: dict[str, list[list[Any]]] = json.loads(",
        "    '{'",
    ]
    lines += _json_rows(messages)
    lines += ["    '}'", ")", "", "SERVICES: dict[str, list[list[Any]]] = json.loads(", "    '{'"]
    lines += _json_rows(services)
    lines += ["    '}'", ")", "", "ENUMS: dict[str, list[list[Any]]] = json.loads(", "    '{'"]
    lines += _json_rows(enums)
    lines += ["    '}'", ")"]
    return "\n".join(lines) + "\n"


def _used_well_known(messages: dict[str, list[tuple[Any, ...]]]) -> set[str]:
    """The full names of the well-known messages (and their enums) the API's messages reach."""
    used: set[str] = set()
    todo = [name for name in messages if "." not in name]
    seen = set(todo)
    while todo:
        for _, _, kind, type_name, *_ in messages[todo.pop()]:
            names = [type_name[-1]] if kind == "map" else [type_name]
            for name in names:
                if name and "." in name:
                    used.add(name)
                    if name not in seen and name in messages:
                        seen.add(name)
                        todo.append(name)
    # google.protobuf.Value's null_value is the enum NullValue (kind "enum", no type name).
    if "google.protobuf.Value" in used:
        used.add("google.protobuf.NullValue")
    return used


def _json_rows(table: dict[str, Any]) -> list[str]:
    """``table`` as the lines of a JSON object's members, one Python string literal each."""
    members = [
        json.dumps(name) + ":" + json.dumps(rows, separators=(",", ":"))
        for name, rows in table.items()
    ]
    return [f"    {(m + (',' if i < len(members) - 1 else ''))!r}" for i, m in enumerate(members)]


def snapshot(d: pathlib.Path) -> dict[str, bytes]:
    # Byte-code caches are Python's, not the generator's: a run of the tests leaves them.
    return {
        str(p.relative_to(d)): p.read_bytes()
        for p in sorted(d.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def main() -> int:
    check = "--check" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        fresh = pathlib.Path(tmp) / "gen"
        fresh.mkdir()
        generate(fresh)
        if check:
            if not OUT_DIR.is_dir() or snapshot(fresh) != snapshot(OUT_DIR):
                print(
                    "harness/determined/api/gen is stale: run `python3 api/generate.py`",
                    file=sys.stderr,
                )
                return 1
            return 0
        shutil.rmtree(OUT_DIR, ignore_errors=True)
        shutil.copytree(fresh, OUT_DIR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
