"""Regenerate the Python bindings from api/proto: `python3 api/generate.py`.

The output, harness/determined/api/gen/, is committed; CI runs this and fails when git
sees a difference (`python3 api/generate.py --check`).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

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
