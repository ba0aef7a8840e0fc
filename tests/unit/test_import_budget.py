"""Every trial starts two fresh interpreters (its launcher and its script), so what they
import is a per-trial cost (issue 12). These tests pin what each entry point must not
load, by name, in a fresh interpreter: a regression fails here instead of showing up as a
slower benchmark on a busy machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# The generated betterproto2 API and its stack (pydantic, grpclib's asyncio client, h2):
# the master's, the agent's and the CLI's; tasks use determined.api.lite and .channel.
GENERATED_API = ("betterproto2", "pydantic", "determined.api.gen.v1", "grpclib.client", "h2")
# Libraries a launcher or a training script does not need to start.
UNNEEDED = ("yaml", "pathspec", "tabulate", "torch", "numpy", "determined.common.expconf")


def loaded_after(code: str) -> set[str]:
    """The module names in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def offenders(modules: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == b or m.startswith(b + ".") for b in banned))


def test_import_determined_loads_no_api_and_no_core() -> None:
    modules = loaded_after("import determined")
    assert offenders(modules, (*GENERATED_API, *UNNEEDED, "grpclib", "asyncio")) == []
    assert "determined.core" not in modules


@pytest.mark.parametrize(
    "code",
    [
        "import determined.core",
        # What a script's core.init() on a cluster imports besides.
        "import determined.core._rpc, determined.core._session, determined.core._metrics",
    ],
)
def test_the_core_api_loads_no_generated_api(code: str) -> None:
    assert offenders(loaded_after(code), (*GENERATED_API, *UNNEEDED)) == []


def test_a_scripts_start_loads_uuid_pickle_and_s3_only_when_it_needs_them() -> None:
    # uuid (with platform) is for a checkpoint's id, pickle for a collective across workers,
    # the S3 client for S3 storage: a start that a trial which uses none of them should not pay.
    code = "import determined.core._rpc, determined.core._session, determined.core._metrics"
    banned = ("uuid", "platform", "pickle", "determined.common.s3")
    assert offenders(loaded_after(code), banned) == []


def test_import_determined_core_alone_starts_no_event_loop_machinery() -> None:
    # asyncio (and the channel) are for the cluster: core.init() loads them there.
    modules = loaded_after("import determined.core")
    assert offenders(modules, ("asyncio", "grpclib", "hpack", "determined.api")) == []


def test_the_launcher_loads_no_generated_api_no_event_loop_and_no_dataclasses() -> None:
    modules = loaded_after("import determined.exec.launch")
    assert offenders(modules, (*GENERATED_API, *UNNEEDED, "asyncio", "dataclasses")) == []


def test_the_launcher_loads_the_context_reader_without_the_packer() -> None:
    modules = loaded_after("import determined.exec.launch")
    assert "determined.common.context_archive" in modules
    assert offenders(modules, ("determined.common.context", "gzip")) == []
