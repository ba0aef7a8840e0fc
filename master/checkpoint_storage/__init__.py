"""The master's side of checkpoint storage: where a storage config keeps a checkpoint's
files on a shared file system (``shared_fs``) and how their objects are deleted from S3
(``s3``). The master never writes checkpoints; tasks do, through ``determined.core``.

May use: ``determined`` only. Used by ``experiments`` (deleting checkpoints) and ``tasks``
(TensorBoards reading what trials uploaded).
"""
