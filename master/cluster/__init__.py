"""What admins set at run time for the whole cluster: the cluster-wide message
(``messages``) and the config policies every new workload is held to (``policies``). Both
are kept in the store, so a restarted master still has them.

May use: ``store`` (and ``determined.common``).
"""
