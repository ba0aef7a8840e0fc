"""Commands, notebooks and shells (Determined's generic commands, `det cmd|notebook|shell`):
tasks that run what a user asks on an agent, outside any experiment.

- ``launcher``: a launch request (config, template, context) made into a task of the
  ``tasks.generic`` kind it is, and the start order its container runs with;
- ``commands``: a command's entrypoint run once, its output and exit code its result; and
  the launch of all three kinds;
- ``notebooks``: JupyterLab behind the proxy, with a token only the proxy sends, and what
  its task reports about being idle;
- ``shells``: sshd with a key pair the master makes, reached by ssh through the proxy.

Phases, the queue, the proxy, idle timeouts and surviving a master restart are
``tasks.generic``'s; this package says what each kind runs and how the API shows it.

May use: ``tasks``, ``agents``, ``logs``, ``store``. Not ``experiments`` (the façade applies
templates before a config reaches this package).
"""
