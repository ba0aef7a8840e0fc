"""Launchers: ``python3 -m determined.launch.X [[OVERRIDES...] --] (--trial TRIAL | SCRIPT...)``.

Each launcher reads the task's rendezvous from ``det.get_cluster_info()``, starts the real
distributed engine (``torch.distributed.run``, the DeepSpeed runner, ``horovodrun``) with the
right node count, ranks and chief address, wraps every worker in ``wrap_rank`` so that log
lines carry their rank, and ends all workers as soon as one of them fails.

- ``wrap_rank``: prefix a command's output lines with ``[rank=N] ``.
- ``torch_distributed``: ``torch.distributed.run`` across the task's containers.
- ``deepspeed``: the DeepSpeed runner, one node per container, without ssh.
- ``horovod``: ``horovodrun`` from the chief container.
"""
