"""Pieces of the coming Slurm resource pool (issue 14), not wired into the scheduler yet.

A Slurm pool will turn each trial allocation into one batch job: ``sbatch`` builds its
script from the pool's settings and the experiment's ``slurm.sbatch_args``; ``squeue``
reads the queue back into job states and pending reasons. Both are pure (no processes are
run here) so that they can be tested without a cluster; ``tests/slurm`` runs what they
produce on a real one.
"""
