"""The master's store: SQLite (embedded) or PostgreSQL behind one ``Database`` with units of
work (``db``), the SQLite dialect rewritten for PostgreSQL (``dialect``), the versioned
migrations (``migrations``) and the fold of a metric report into a stored one
(``report_merge``, which a migration also uses).

The bottom layer: it imports no other package of the master. Everything that writes or
reads rows goes through it; the reads the API makes are in ``queries``.
"""
