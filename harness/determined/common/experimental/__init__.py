"""The Python SDK's objects (``Determined``, ``Experiment``, ``Trial``, ``Checkpoint``);
scripts import them from ``determined.experimental.client``."""
