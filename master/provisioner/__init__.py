"""Elastic resource pools: the master grows and shrinks a pool's instances.

- ``settings``: a pool's ``provider:`` settings, as Determined names them.
- ``decider``: the scale decider, a pure function from one pool's instances, agents and
  queued work (and what it remembered from its previous call) to how many instances to
  launch and which to terminate, with a reason for each; ``demand`` turns the slots the
  scheduler could not place into the number of instances they need. Both are pure so that
  they can be tested tick by tick and benchmarked over many large pools.
- ``provider``: what every provider does, and the startup script that starts an
  instance's agent; ``aws`` (EC2 through boto3) and ``command`` (the admin's programs)
  are the providers.
- ``provisioner``: one pool's loop (queue and agents in, decisions out, each logged with
  its reason, a failing provider backed off); ``pools``: the master's elastic pools.

Owns: elastic pools and their instances (the provider's list is the truth; nothing is
stored, so a restarted master finds its instances again).
May use: ``agents`` and ``tasks``; ``decider`` and ``demand`` use nothing of the master
(a contract keeps them pure: no store, no I/O subsystem).
"""
