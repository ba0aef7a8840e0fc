"""The images of the docker runtime, built without any registry, from what is installed.

    pydet-base:trixie    a minimal Debian with python3, venv and pip, made with debootstrap
                         and `docker import`; cached: skipped when the engine has it,
                         re-imported from $PYDET_IMAGE_CACHE/pydet-base-<suite>.tar.gz when the
                         engine lost it but the tarball is there. The suite is trixie (Python
                         3.13): bookworm's Python 3.11.2 predates tarfile's extraction filters
                         (3.11.4), which the harness uses to unpack the experiment's context.
    pydet-task:latest    the project's Dockerfile, with pydet (master, agent, `det` and the
                         `determined` harness) installed from a source tree assembled from the
                         pydet installed here: the same code as the agent's, from a wheel or a
                         checkout alike. The agent's default task image.

The recipe (the Dockerfile and the project files it installs from) is package data in
``pydet/cli/image/``: links to the checkout's top-level files, plain files in a wheel.
torch is not in these images (they stay small): images for torch work come from the user.

`python -m pydet.cli.images` builds both (scripts/docker/build-images.sh in a checkout);
`det deploy local cluster-up --runtime docker` does when the default image is missing.
Needs a running engine and, for a base image not cached yet, root for debootstrap. A cold
build takes 5-10 minutes; one with nothing changed a few seconds.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.resources
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from determined.common import errors

DEFAULT_TASK_IMAGE = "pydet-task:latest"
# The files of pydet/cli/image/ that the Dockerfile copies into its build.
RECIPE = ("Dockerfile", "pyproject.toml", "README.md")
PACKAGES = ("pydet", "determined")
CA_DIR = Path("scripts/docker/ca-certificates")  # in the build context, as in a checkout
WEBUI_INDEX = Path("harness/pydet/master/gateway/webui/index.html")
BUILD_TIMEOUT = 30 * 60.0


@dataclass(frozen=True)
class Settings:
    suite: str = "trixie"
    base: str = "pydet-base:trixie"
    task: str = DEFAULT_TASK_IMAGE
    cache: Path = Path("/var/cache/pydet-images")
    mirror: str = "http://deb.debian.org/debian"
    # Authorities this host trusts beyond the usual ones: pip inside the build must trust
    # them too where HTTPS goes through an intercepting proxy.
    extra_ca_dir: Path = Path("/usr/local/share/ca-certificates")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        suite = environ.get("PYDET_DEBIAN_SUITE") or cls.suite
        return cls(
            suite=suite,
            base=environ.get("PYDET_BASE_IMAGE") or f"pydet-base:{suite}",
            task=environ.get("PYDET_TASK_IMAGE") or cls.task,
            cache=Path(environ.get("PYDET_IMAGE_CACHE") or cls.cache),
            mirror=environ.get("PYDET_DEBIAN_MIRROR") or cls.mirror,
            extra_ca_dir=Path(environ.get("PYDET_EXTRA_CA_DIR") or cls.extra_ca_dir),
        )


def say(message: str) -> None:
    print(f"pydet images: {message}", file=sys.stderr, flush=True)


def _docker(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise errors.FailedPrecondition(
            "the docker command is missing (on Debian: scripts/docker/install.sh)"
        ) from None


def present(image: str) -> bool:
    return _docker("image", "inspect", image).returncode == 0


def build(settings: Settings) -> None:
    """Build the base image when the engine lacks it, then the task image."""
    if _docker("info", timeout=30).returncode != 0:
        raise errors.FailedPrecondition(
            "no Docker engine answers; start one (on Debian: scripts/docker/install.sh)"
        )
    try:
        settings.cache.mkdir(parents=True, exist_ok=True)
        lock = (settings.cache / ".lock").open("w")
    except OSError as e:
        raise errors.FailedPrecondition(
            f"cannot use {settings.cache} for the image cache ({e.strerror}): run as root or "
            "set PYDET_IMAGE_CACHE to a directory of yours"
        ) from None
    start = time.monotonic()
    with lock:
        # One build at a time (a test run may start one while another is under way).
        fcntl.flock(lock, fcntl.LOCK_EX)
        if present(settings.base):
            say(f"{settings.base} is present (cached)")
        else:
            build_base(settings)
        build_task(settings)
    say(f"done in {time.monotonic() - start:.0f}s: {settings.base}, {settings.task}")


def build_base(settings: Settings) -> None:
    tarball = settings.cache / f"pydet-base-{settings.suite}.tar.gz"
    if not tarball.is_file() or tarball.stat().st_size == 0:
        _debootstrap(settings, tarball)
    say(f"importing {tarball} as {settings.base}")
    imported = _docker(
        "import",
        "-c",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "-c",
        "ENV LANG=C.UTF-8",
        "-c",
        'CMD ["/bin/bash"]',
        str(tarball),
        settings.base,
        timeout=600,
    )
    if imported.returncode != 0:
        raise errors.DetError(f"docker import of {tarball} failed: {imported.stderr.strip()}")


def _debootstrap(settings: Settings, tarball: Path) -> None:
    if os.geteuid() != 0:
        raise errors.FailedPrecondition(
            f"building {settings.base} needs root (debootstrap); run this as root once"
        )
    if shutil.which("debootstrap") is None:
        raise errors.FailedPrecondition(
            "debootstrap is missing (on Debian: apt-get install debootstrap, or "
            "scripts/docker/install.sh)"
        )
    rootfs = Path(tempfile.mkdtemp(prefix="rootfs.", dir=settings.cache))
    log = settings.cache / "debootstrap.log"
    try:
        say(f"debootstrapping Debian {settings.suite} into {rootfs} (takes a few minutes)")
        with log.open("wb") as out:
            code = subprocess.run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    # openssh-server and -client: `det shell` runs sshd in the task.
                    "--include=python3,python3-venv,python3-pip,ca-certificates,procps,"
                    "openssh-server,openssh-client",
                    settings.suite,
                    str(rootfs),
                    settings.mirror,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=BUILD_TIMEOUT,
                check=False,
            ).returncode
        if code != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise errors.DetError(f"debootstrap failed; last lines of {log}:\n{tail}")
        # What an image does not need: package lists, caches, docs.
        for pattern in (
            "var/lib/apt/lists/*",
            "var/cache/apt/*.bin",
            "var/cache/apt/archives/*.deb",
            "usr/share/doc/*",
            "usr/share/man/*",
        ):
            for path in rootfs.glob(pattern):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        partial = tarball.with_name(tarball.name + ".tmp")
        packed = subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-czf", str(partial), "."],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
            check=False,
        )
        if packed.returncode != 0:
            raise errors.DetError(f"packing {rootfs} failed: {packed.stderr.strip()[-2000:]}")
        partial.replace(tarball)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)


def build_task(settings: Settings) -> None:
    with tempfile.TemporaryDirectory(prefix="pydet-image-") as tmp:
        context = Path(tmp)
        assemble_context(context, settings.extra_ca_dir)
        say(f"building {settings.task} from pydet as installed in {installed_at()}")
        code = subprocess.run(
            [
                "docker",
                "build",
                "--force-rm",  # no stopped containers left from a failed step
                "--network",
                "host",
                "--build-arg",
                f"BASE={settings.base}",
                "-t",
                settings.task,
                str(context),
            ],
            stdout=sys.stderr,
            timeout=BUILD_TIMEOUT,
            check=False,
        ).returncode
    if code != 0:
        raise errors.DetError(f"docker build of {settings.task} failed (exit code {code})")


def installed_at() -> Path:
    return _package_dir("pydet").parent


def _package_dir(name: str) -> Path:
    root = importlib.resources.files(name)
    # pip installs wheels as plain files (never zipped), and a checkout is plain files too.
    if not isinstance(root, Path):
        raise errors.FailedPrecondition(f"{name} is not installed as files: {root}")
    return root


def assemble_context(context: Path, extra_ca_dir: Path) -> None:
    """The image's build context: the recipe, and a source tree of the installed ``pydet``
    and ``determined`` packages in the layout of pyproject.toml (``harness/<package>``)."""
    recipe = _package_dir("pydet.cli") / "image"
    for name in RECIPE:
        shutil.copyfile(recipe / name, context / name)
    for name in PACKAGES:
        # Links are followed: in a checkout, harness/pydet links to master/, agent/, cli/.
        shutil.copytree(
            _package_dir(name),
            context / "harness" / name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    if not (context / WEBUI_INDEX).is_file():
        raise errors.FailedPrecondition(
            "the WebUI is not built, and the image's master serves it: run "
            "scripts/webui.sh build first"
        )
    cas = context / CA_DIR
    cas.mkdir(parents=True)
    for crt in sorted(extra_ca_dir.glob("*.crt")):
        if crt.is_file():
            shutil.copyfile(crt, cas / crt.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pydet.cli.images",
        description="Build pydet's Docker images (pydet-base, then pydet-task) from the pydet "
        "installed here. Environment: PYDET_DEBIAN_SUITE, PYDET_BASE_IMAGE, PYDET_TASK_IMAGE, "
        "PYDET_IMAGE_CACHE, PYDET_DEBIAN_MIRROR, PYDET_EXTRA_CA_DIR.",
    )
    parser.parse_args(argv)
    try:
        build(Settings.from_env())
    except errors.DetError as e:
        say(e.message)
        return 1
    except subprocess.TimeoutExpired as e:
        say(f"{e.cmd[0]} did not finish within {e.timeout:.0f}s")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
