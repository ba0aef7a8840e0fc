"""Determined's experimental APIs: ``client`` (the Python SDK) and ``core_v2``.

Import the submodules themselves (``from determined.experimental import client``); nothing is
loaded here, so ``import determined`` stays light for code inside tasks.
"""
