"""Determined's Keras API: ``DeterminedCallback`` and ``TensorBoard`` for ``model.fit()``.

.. code:: python

    distributed, strategy = det.core.DistributedContext.from_tf_config()
    with det.core.init(distributed=distributed) as core_context:
        with strategy.scope():
            model = build_and_compile()
        info = det.get_cluster_info()
        det_cb = det.keras.DeterminedCallback(
            core_context, checkpoint=info.latest_checkpoint, continue_id=info.trial.trial_id
        )
        tb_cb = det.keras.TensorBoard(core_context, update_freq="batch")
        model.fit(x, y, epochs=10, validation_data=(vx, vy), callbacks=[det_cb, tb_cb])

Run the script under ``python3 -m determined.launch.tensorflow -- python3 train.py``. Keras 3
(TensorFlow 2.16 and later) and tf.keras 2 both work. Importing this package imports
TensorFlow (``tensorflow.keras``), as Determined's does; it never imports torch.
"""

from __future__ import annotations

from determined.keras._callback import CheckpointLoadError, DeterminedCallback, TensorBoard

__all__ = ["CheckpointLoadError", "DeterminedCallback", "TensorBoard"]
