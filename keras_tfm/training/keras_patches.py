"""Workarounds for Keras bugs under `MultiWorkerMirroredStrategy`, applied only inside `train`."""

import tensorflow as tf


def _patch_multi_worker_reduce():
    """Works around Keras 3.15 reducing scalar step outputs with `axis=0` under multi-worker.

    `keras.src.backend.tensorflow.trainer.reduce_per_replica` calls
    `strategy.reduce("MEAN", v, axis=0)` on every step output (the scalar
    loss and metric results) when the strategy is a multi-worker
    `MultiWorkerMirroredStrategy`, which fails for scalars ("Invalid reduction
    dimension 0"). Scalars are averaged over replicas with `axis=None` here;
    everything else keeps Keras's behaviour.
    """
    from keras.src.backend.tensorflow import trainer as tf_trainer

    if getattr(tf_trainer, "_keras_tfm_patched", False):
        return
    original = tf_trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and tf_trainer._collective_all_reduce_multi_worker(strategy):

            def reduce(v):
                if isinstance(v, (tf.Tensor, tf.distribute.DistributedValues)):
                    rank = (
                        v.shape.rank
                        if isinstance(v, tf.Tensor)
                        else strategy.experimental_local_results(v)[0].shape.rank
                    )
                    if rank == 0:
                        return strategy.reduce("MEAN", v, axis=None)
                    return strategy.reduce("MEAN", v, axis=0)
                return v

            return tf.nest.map_structure(reduce, values)
        return original(values, strategy, reduction)

    tf_trainer.reduce_per_replica = reduce_per_replica
    tf_trainer._keras_tfm_patched = True


def _patch_symbolic_build(model, strategy):
    """Works around Keras 3.15 under `MultiWorkerMirroredStrategy`.

    Before training, `fit` builds the metrics/optimizer from one batch that it
    averages over replicas with `strategy.reduce("MEAN", (x, y))`; the
    collective reduce of a nested integer batch fails ("Attempt to convert a
    value (PerReplica...) to a Tensor"). Only the shapes matter there, so the
    first local replica's batch is used instead.
    """
    _patch_multi_worker_reduce()
    if getattr(model, "_keras_tfm_patched_build", False):
        return
    original = model._maybe_symbolic_build

    def local_batch(value):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    def maybe_symbolic_build(iterator=None, data_batch=None):
        if iterator is not None and data_batch is None:
            for _, _, it in iterator:
                data_batch = tf.nest.map_structure(local_batch, next(it))
                break
        return original(iterator=None, data_batch=data_batch)

    model._maybe_symbolic_build = maybe_symbolic_build
    model._keras_tfm_patched_build = True
