"""pydet's build: setuptools, configured in pyproject.toml, plus one check.

The master serves the WebUI from its package (master/gateway/webui, package data), and the
build output of webui/ is not committed: a wheel or an sdist made without it would install
a master with no WebUI, so the build stops and says how to make it.
"""

from __future__ import annotations

import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

# The same path in a checkout (harness/pydet/master links to master/) and an unpacked sdist.
WEBUI_INDEX = pathlib.Path("harness/pydet/master/gateway/webui/index.html")


def require_webui() -> None:
    if not (pathlib.Path(__file__).absolute().parent / WEBUI_INDEX).is_file():
        raise SystemExit(
            f"error: the WebUI is not built ({WEBUI_INDEX} is missing), and pydet's wheel and "
            "sdist must carry it: run scripts/webui.sh build first"
        )


class BuildPyWithWebUI(build_py):
    def run(self) -> None:
        # An editable install (scripts/setup.sh) serves whatever the checkout holds.
        if not self.editable_mode:
            require_webui()
        super().run()


class SdistWithWebUI(sdist):
    def run(self) -> None:
        require_webui()
        super().run()


setup(cmdclass={"build_py": BuildPyWithWebUI, "sdist": SdistWithWebUI})
