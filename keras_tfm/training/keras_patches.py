"""Workarounds for Keras bugs, each version-guarded and applied only where it is needed.

Every workaround touching Keras internals lives here, with the Keras behaviour
it works around, the versions it applies to, and a test in
`tests/test_training.py` (`test_keras_still_needs_*`) that fails once Keras
changes the behaviour — then update the guard and drop the workaround.

1. `multi_worker_workarounds(model, strategy)` — a context manager that `train`
   enters around its `fit` calls under `MultiWorkerMirroredStrategy` only, and
   that restores everything it changed on exit (no process-wide side effect):

   a. Scalar step outputs reduced with `axis=0`. Keras's TensorFlow trainer
      (`keras/src/backend/tensorflow/trainer.py`, `reduce_per_replica`) calls
      `strategy.reduce("MEAN", v, axis=0)` on every step output when the
      strategy runs multi-worker; the loss and metric results are scalars, so
      `fit` fails with "Invalid reduction dimension 0 for input with 0
      dimensions" (reported as tensorflow/tensorflow#72388, "tf.distribute and
      keras 3 incompatibility", closed without a Keras fix). Scalars are
      averaged over replicas with `axis=None` instead.
   b. The symbolic build averages an integer batch. Before the first step
      `fit` builds the metrics and optimizer from one batch, which
      `Trainer._maybe_symbolic_build` averages over replicas with
      `strategy.reduce("MEAN", batch, axis=None)`; under multi-worker the
      collective reduce of a nested integer batch (token ids, dict inputs)
      fails ("Attempt to convert a value (PerReplica...) to a Tensor"; see
      keras-team/keras#20329, "MultiWorkerMirroredStrategy and input
      dictionaries", open). Only the shapes matter there, so the first local
      replica's batch is used; the model's own method is restored on exit.

2. `set_fit_initial_epoch(model, epoch)` / `clear_fit_initial_epoch(model)` —
   a callback cannot tell `fit` which epoch to start from through a public
   API: Keras's own `BackupAndRestore` writes the private
   `model._initial_epoch` in `on_train_begin`, which `fit` reads right after
   (`initial_epoch = self._initial_epoch or initial_epoch` in every backend's
   trainer), and `fit` never resets it, so a later `fit` on the same model
   would start at the restored epoch again. `AtomicBackupAndRestore` sets it
   through this helper and clears it in `on_train_end`.
"""

import contextlib
import warnings

import keras
from packaging.version import Version

#: Keras versions with the multi-worker reduce bugs (1a, 1b): 3.0 up to the last one checked.
#: When a Keras release fixes them, set its version as the exclusive upper bound.
MULTI_WORKER_AFFECTED = (Version("3.0.0"), None)
#: Keras versions in which `fit` reads (and never resets) `model._initial_epoch` (2).
INITIAL_EPOCH_ATTRIBUTE = (Version("3.0.0"), None)


def _in_range(bounds, version=None):
    low, high = bounds
    version = Version(version or keras.version())
    return version >= low and (high is None or version < high)


def multi_worker_reduce_affected(version=None):
    """Whether this Keras version needs the multi-worker workarounds (1a, 1b)."""
    return _in_range(MULTI_WORKER_AFFECTED, version)


def initial_epoch_attribute_used(version=None):
    """Whether `fit` of this Keras version takes its first epoch from `model._initial_epoch` (2)."""
    return _in_range(INITIAL_EPOCH_ATTRIBUTE, version)


# --------------------------------------------------------------------------- #
# 1. MultiWorkerMirroredStrategy
# --------------------------------------------------------------------------- #


def _scalar_safe_reduce_per_replica(original, tf_trainer):
    import tensorflow as tf

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and tf_trainer._collective_all_reduce_multi_worker(strategy):

            def reduce(v):
                if isinstance(v, (tf.Tensor, tf.distribute.DistributedValues)):
                    rank = (
                        v.shape.rank
                        if isinstance(v, tf.Tensor)
                        else strategy.experimental_local_results(v)[0].shape.rank
                    )
                    return strategy.reduce("MEAN", v, axis=None if rank == 0 else 0)
                return v

            return tf.nest.map_structure(reduce, values)
        return original(values, strategy, reduction)

    return reduce_per_replica


def _local_batch_symbolic_build(original, strategy):
    import tensorflow as tf

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

    return maybe_symbolic_build


@contextlib.contextmanager
def multi_worker_workarounds(model, strategy):
    """Applies workarounds 1a and 1b (see the module docstring) for the duration of the block.

    Does nothing unless `strategy` is a `MultiWorkerMirroredStrategy` and the
    Keras version is affected. Everything patched is restored on exit, also
    when the block raises.
    """
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or not (
        multi_worker_reduce_affected()
    ):
        yield
        return
    from keras.src.backend.tensorflow import trainer as tf_trainer

    needed = ("reduce_per_replica", "_collective_all_reduce_multi_worker")
    if not all(hasattr(tf_trainer, name) for name in needed) or not hasattr(model, "_maybe_symbolic_build"):
        warnings.warn(
            f"Keras {keras.version()} changed the internals that keras_tfm's multi-worker workarounds "
            "patch; training without them (see keras_tfm.training.keras_patches).",
            stacklevel=3,
        )
        yield
        return
    original_reduce = tf_trainer.reduce_per_replica
    had_own_build = "_maybe_symbolic_build" in vars(model)
    original_build = model._maybe_symbolic_build
    tf_trainer.reduce_per_replica = _scalar_safe_reduce_per_replica(original_reduce, tf_trainer)
    model._maybe_symbolic_build = _local_batch_symbolic_build(original_build, strategy)
    try:
        yield
    finally:
        tf_trainer.reduce_per_replica = original_reduce
        if had_own_build:
            model._maybe_symbolic_build = original_build
        else:
            del model._maybe_symbolic_build


# --------------------------------------------------------------------------- #
# 2. Starting epoch chosen by a callback
# --------------------------------------------------------------------------- #


def set_fit_initial_epoch(model, epoch):
    """Makes the running `fit` start at `epoch` (call from `on_train_begin`), as Keras's `BackupAndRestore` does."""
    if not initial_epoch_attribute_used():
        raise RuntimeError(
            f"keras_tfm does not know how Keras {keras.version()} lets a callback choose fit's first "
            "epoch; see keras_tfm.training.keras_patches."
        )
    model._initial_epoch = int(epoch)


def clear_fit_initial_epoch(model):
    """Undoes `set_fit_initial_epoch` (call from `on_train_end`) so a later `fit` starts where asked."""
    if initial_epoch_attribute_used() and hasattr(model, "_initial_epoch"):
        model._initial_epoch = None
