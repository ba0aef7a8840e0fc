"""How the workers' parts of a sharded checkpoint make one checkpoint.

With ``shard=True`` (see ``_checkpoint``) every worker passes its own metadata and saves its
own files: the metadata dicts are merged (values that differ are reported by key and rank),
the file lists are checked for a failed worker and for paths more than one worker wrote, and
the lists are merged into the checkpoint's resources.
"""

from __future__ import annotations

from typing import Any


def merge_metadata(all_metadata: list[Any]) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """Merge the workers' metadata dicts: nested dicts merge, other values must agree.

    Returns the merged dict and, for each conflicting key path, the ranks that disagree.
    """
    merged: dict[str, Any] = {}
    owners: dict[str, list[int]] = {}
    conflicts: dict[str, list[int]] = {}

    absent = object()

    def merge(into: dict[str, Any], new: dict[str, Any], rank: int, prefix: str) -> None:
        for key, value in new.items():
            path = f"{prefix}{key}"
            existing = into.get(key, absent)
            if isinstance(value, dict) and (existing is absent or isinstance(existing, dict)):
                owners.setdefault(path, []).append(rank)
                merge(into.setdefault(key, {}), value, rank, path + "/")
            elif existing is absent:
                into[key] = value
                owners[path] = [rank]
            elif existing != value:
                conflicts.setdefault(path, list(owners.get(path, []))).append(rank)
            else:
                owners[path].append(rank)

    for rank, metadata in enumerate(all_metadata):
        merge(merged, metadata or {}, rank, "")
    return merged, conflicts


def _shard_problem(listings: list[Any]) -> str | None:
    """Why the workers' files cannot form one checkpoint (a worker failed, or files clash)."""
    failed = [f"rank {r}: {detail}" for r, (state, detail) in enumerate(listings) if state != "ok"]
    if failed:
        return "a worker failed while saving its part (" + "; ".join(failed) + ")"
    writers: dict[str, list[int]] = {}
    dirs: dict[str, list[int]] = {}
    for rank, (_, files) in enumerate(listings):
        for rel in files:
            writers.setdefault(rel, []).append(rank)
            parts = rel.split("/")
            for i in range(1, len(parts)):
                dirs.setdefault("/".join(parts[:i]), []).append(rank)
    clashes = [f"{rel} (ranks {ranks})" for rel, ranks in sorted(writers.items()) if len(ranks) > 1]
    clashes += [
        f"{rel} (a file of ranks {writers[rel]}, a directory of ranks {sorted(set(ranks))})"
        for rel, ranks in sorted(dirs.items())
        if rel in writers
    ]
    if clashes:
        return "more than one worker wrote the same path: " + ", ".join(clashes)
    return None


def _merged(listings: list[Any]) -> dict[str, int]:
    """Every worker's files (relative path → size) from the sharded listings."""
    return {rel: size for state, files in listings if state == "ok" for rel, size in files.items()}
