"""Training utilities shared by the examples and the `keras-tfm` CLI.

Everything here drives plain `model.fit`; there is no per-step Python work
(data comes from `tf.data` with prefetch, `steps_per_execution` groups steps
into one graph call).

* `distribution_strategy(name)`: "default" | "mirrored" | "multi_worker".
* `set_precision(policy)`: "float32" | "mixed_float16" | "mixed_bfloat16"
  (Keras wraps the optimizer in a `LossScaleOptimizer` under mixed_float16
  when the model is built after the policy is set).
* `AtomicBackupAndRestore`: `keras.callbacks.BackupAndRestore` whose backups
  are written atomically (temporary name, fsync, `os.replace`) and which
  resumes in the middle of an epoch, at the step of the last backup, when used
  through `train`.
* `default_callbacks(...)`: TensorBoard + backup + NaN guard.
* `indexed_batches(batch_fn, ...)`: a resumable `tf.data` pipeline whose
  element `i` depends only on `(seed, i)`.
* `train(model, data, steps=..., ...)`: the loop the examples and the CLI share.

Modules, one concept each: `strategies` (tf.distribute, precision),
`atomic_files` (temporary name, fsync, rename), `backup` (the backup callback),
`standard_callbacks` (timer, TensorBoard, defaults), `data` (resumable
datasets), `keras_patches` (every use of Keras internals, version-guarded; the
multi-worker ones only inside `train`) and `loop` (`train`).
"""

from keras_tfm.training.atomic_files import atomic_write_text
from keras_tfm.training.backup import AtomicBackupAndRestore
from keras_tfm.training.data import indexed_batches
from keras_tfm.training.loop import TrainResult, _segments, num_epochs, train
from keras_tfm.training.standard_callbacks import (
    StepTimer,
    TimeBudget,
    default_callbacks,
    tensorboard_available,
    tensorboard_callback,
)
from keras_tfm.training.strategies import (
    PRECISIONS,
    STRATEGIES,
    distribution_strategy,
    is_chief,
    set_precision,
)

__all__ = [
    "AtomicBackupAndRestore",
    "StepTimer",
    "TimeBudget",
    "TrainResult",
    "default_callbacks",
    "distribution_strategy",
    "indexed_batches",
    "is_chief",
    "set_precision",
    "train",
]
