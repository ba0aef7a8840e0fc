"""The model registry: models (``models``), each in a workspace, and their numbered versions
(``versions``), each holding one completed checkpoint; ``registry`` holds both over one
store. A checkpoint a version holds is never
garbage-collected and its deletion is refused (``experiments.checkpoints`` asks
``queries.registrations``).

A model is named in requests by its name or by its id (a name is never only digits, as in
Determined).

May use: ``workspaces`` (a model's workspace, by name or id), ``queries`` and ``store``.
"""
