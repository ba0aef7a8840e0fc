"""Agents: the table of known agents with their slots (``table``), which the scheduler reads
and the task manager gives orders through, and the ``Agents.Connect`` stream that each
agent keeps open to the master (``hub``).

Owns: agent registration, slots, liveness and reconnection, agent-side orders.
May use: ``determined`` only; nothing of the master (the experiments and tasks above it
reach agents through ``AgentTable`` and ``AgentEvents``).
"""
