"""Where teams keep their work: workspaces (``workspaces``), the projects in them
(``projects``), where a new experiment goes and what its workspace gives its config
(``placement``), and experiments moved between projects (``moves``); ``organization`` holds
the four over one store, ``names`` the rules names and project keys follow, and ``listing``
what the lists share (the model registry's too).

Workspace and project 1, "Uncategorized", are the defaults (Determined's): immutable, they
hold every experiment that names no project.

May use: ``queries``, ``states`` and ``store``.
"""
