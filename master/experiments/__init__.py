"""Experiments and trials: everything that happens to them between create and delete.

- ``live``: the experiments and trials the master holds while they run;
  ``experiment_store``: every write their state machines make.
- ``trial_lifecycle``: a trial's phases and the one transition table that moves them;
  ``trial_moves`` carries out what a move orders; ``shown_state``: the state users see.
- ``manager``: experiments created, steered, placed, started, preempted and ended
  (``Experiments``); ``search_runner`` carries out the searcher's operations;
  ``restore`` picks every live experiment up after a master restart.
- ``reports``: metrics and progress; ``checkpoints`` and ``retention``: checkpoint records
  and garbage collection; ``log_policies``: what a trial's log lines trigger.
- ``templates``, ``warm_start`` (a search seeded from an earlier one), ``unmanaged``
  (runs reported from off the cluster), ``json_input``.

May use: ``tasks``, ``agents``, ``logs``, ``search``, ``queries``, ``checkpoint_storage``,
``events``, ``states`` and ``store``. Never a transport (``api``, ``gateway``).
"""
