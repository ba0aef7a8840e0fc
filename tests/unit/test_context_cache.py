"""An agent's copies of contexts: kept by their SHA-256, used only when true to it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from determined.launch import context_cache

CONTEXT = b"\x1f\x8b a packed context"


def env_for(directory: Path, data: bytes = CONTEXT) -> dict[str, str]:
    return {
        context_cache.CACHE_ENV: str(directory),
        context_cache.SHA256_ENV: hashlib.sha256(data).hexdigest(),
    }


def test_a_stored_context_is_loaded_by_the_next_trial(tmp_path: Path) -> None:
    env = env_for(tmp_path / "contexts")
    assert context_cache.load(env) is None
    context_cache.store(env, CONTEXT)
    assert context_cache.load(env) == CONTEXT


def test_nothing_is_cached_without_the_agents_directory_or_the_masters_digest(
    tmp_path: Path,
) -> None:
    env = env_for(tmp_path)
    for missing in (context_cache.CACHE_ENV, context_cache.SHA256_ENV):
        partial = {k: v for k, v in env.items() if k != missing}
        context_cache.store(partial, CONTEXT)
        assert context_cache.load(partial) is None
    assert list(tmp_path.iterdir()) == []


def test_a_planted_copy_is_not_used(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    (tmp_path / f"{env[context_cache.SHA256_ENV]}.tar.gz").write_bytes(b"someone else's code")
    assert context_cache.load(env) is None
    context_cache.store(env, CONTEXT)  # the download replaces it
    assert context_cache.load(env) == CONTEXT


def test_bytes_that_are_not_the_named_context_are_not_stored(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    context_cache.store(env, b"not the context the master named")
    assert list(tmp_path.iterdir()) == []


def test_a_digest_that_is_not_a_sha256_names_no_file(tmp_path: Path) -> None:
    env = {context_cache.CACHE_ENV: str(tmp_path), context_cache.SHA256_ENV: "../../etc/passwd"}
    context_cache.store(env, CONTEXT)
    assert context_cache.load(env) is None
    assert list(tmp_path.iterdir()) == []


def test_only_the_most_recently_used_copies_are_kept(tmp_path: Path) -> None:
    contexts = [CONTEXT + str(i).encode() for i in range(context_cache.KEEP)]
    for i, data in enumerate(contexts):
        context_cache.store(env_for(tmp_path, data), data)
        path = tmp_path / f"{env_for(tmp_path, data)[context_cache.SHA256_ENV]}.tar.gz"
        os.utime(path, (1000.0 + i, 1000.0 + i))  # stored one after another
    # The first is used again: it is now the most recent, and outlives the next prune.
    assert context_cache.load(env_for(tmp_path, contexts[0])) == contexts[0]
    extra = CONTEXT + b"one more"
    context_cache.store(env_for(tmp_path, extra), extra)
    kept = {data for data in [*contexts, extra] if context_cache.load(env_for(tmp_path, data))}
    assert len(kept) == context_cache.KEEP
    assert contexts[0] in kept and extra in kept
    assert contexts[1] not in kept
