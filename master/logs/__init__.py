"""Task logs: ``log_store`` takes the lines agents ship (rank and level parsed), stores them
in batches and serves them with filters and follow; ``retention`` deletes an ended
experiment's logs after ``log_retention_days``.

May use: ``queries``, ``events`` and ``store``. (Log policies act on trials and so live
in ``experiments``.)
"""
