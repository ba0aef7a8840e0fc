"""A resource pool of ``type: slurm``: its trials run as Slurm batch jobs, not on agents.

``pool`` registers the pool's virtual agents in the agent table, turns each allocation's
start orders into one job that it submits and follows (``squeue``, the job's files) and
reports back as an agent would, and adopts the jobs again after a master restart;
``sbatch`` builds the batch scripts and the files they read, ``squeue`` parses the queue
into job states and pending reasons (both pure, testable without a cluster), and
``commands`` runs the Slurm client commands with a timeout and one-line errors.

Owns: Slurm pools, their virtual agents and their jobs (the ``slurm_jobs`` rows).
May use: ``agents``, ``tasks.task_spec`` and ``store``.
"""
