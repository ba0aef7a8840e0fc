"""The job queue as users see it (`det job list`, priorities, moves) and resource pools as
users list them: ``ordering`` is the queue's pure ordering model, ``queue`` applies it to
the live experiments and their tasks.

May use: ``experiments``, ``tasks``, ``agents``, ``queries`` and ``store``.
"""
