"""pydet: the master, the agent and the ``det`` CLI (``pydet.master``, ``pydet.agent``,
``pydet.cli``).

In a checkout these three are the repository's top-level folders, linked here so that one
name works from the checkout, an editable install and a wheel alike; a wheel holds them as
plain subpackages. Training code imports only ``determined``.
"""
