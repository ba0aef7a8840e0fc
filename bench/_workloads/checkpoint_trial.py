"""Saves a 1 GiB checkpoint with store_path, beside shutil.copyfile of a 1 GiB file.

    python3 checkpoint_trial.py REPS OUT_DIR SCRATCH_DIR

The checkpoint is 16 writes of one 64 MiB random buffer, timed from entering store_path
to its return (metadata.json, the file listing and the report to the master included).
The copy copies a 1 GiB file (written once beforehand) within SCRATCH_DIR, which is on the
filesystem of the checkpoint storage. Each repetition runs both, alternating which goes
first; each checkpoint is deleted again (through the Core API) and each copy removed.
"""

import json
import os
import pathlib
import shutil
import sys
import time

from determined import core

CHUNK = 64 * 1024 * 1024
CHUNKS = 16  # 1 GiB


def write_file(path: pathlib.Path, buf: bytes) -> None:
    with open(path, "wb") as f:
        for _ in range(CHUNKS):
            f.write(buf)


def main() -> None:
    reps = int(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    scratch = pathlib.Path(sys.argv[3])
    scratch.mkdir(parents=True, exist_ok=True)
    buf = os.urandom(CHUNK)
    src, dst = scratch / "source.bin", scratch / "copy.bin"
    write_file(src, buf)
    # store_path: the whole `with` block; writing: the writes inside it alone.
    results: dict[str, list[float]] = {"store_path": [], "writing": [], "copyfile": []}
    with core.init() as core_context:

        def store(step: int) -> None:
            began = time.perf_counter()
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                writing = time.perf_counter()
                write_file(path / "model.bin", buf)
                results["writing"].append(time.perf_counter() - writing)
            results["store_path"].append(time.perf_counter() - began)
            meta = core_context.checkpoint.get_metadata(uuid)  # recorded by the master
            assert meta["steps_completed"] == step
            core_context.checkpoint.delete(uuid)

        def copy() -> None:
            began = time.perf_counter()
            shutil.copyfile(src, dst)
            results["copyfile"].append(time.perf_counter() - began)
            dst.unlink()

        for rep in range(reps):
            order = (store, copy) if rep % 2 == 0 else (copy, store)
            for fn in order:
                if fn is store:
                    store(rep + 1)
                else:
                    copy()
    src.unlink()
    (out / "checkpoint.json").write_text(json.dumps({"bytes": CHUNK * CHUNKS, **results}))


if __name__ == "__main__":
    main()
