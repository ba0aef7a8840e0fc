"""Elastic resource pools: the master grows and shrinks a pool's cloud instances.

``decider`` is the scale decider, a pure function from one pool's instances, agents and
queued work (and what it remembered from its previous call) to how many instances to launch
and which to terminate, with a reason for each; ``demand`` turns the slots the scheduler
could not place into the number of instances they need. Both are pure so that they can be
tested tick by tick and benchmarked over many large pools; the providers (the clouds'
instance APIs) and the loop that feeds them will live here too.

Owns: elastic pools: the scale decider (pure); later the providers and the loop.
May use: ``agents``, ``tasks`` and ``store``; ``decider`` and ``demand`` use nothing of the
master (a contract keeps them pure: no store, no I/O subsystem).
"""
