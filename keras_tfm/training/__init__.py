"""Training: compiling a model for its task, and the resumable `model.fit` loop.

* `compile_for_lm(model, ...)`, `compile_for_classification(model, ...)`: `model.compile`
  with the masked token loss and metrics (every Keras backend).
* `train(model, data, steps=..., ...)`: the loop the recipes and the CLI share
  (TensorFlow: `tf.data`, `tf.distribute`).
* `distribution_strategy(name)`: "default" | "mirrored" | "multi_worker".
* `set_precision(policy)`: "float32" | "mixed_float16" | "mixed_bfloat16".
* `AtomicBackupAndRestore`: `keras.callbacks.BackupAndRestore` whose backups are
  written atomically and which resumes in the middle of an epoch (through `train`).
* `default_callbacks(...)`: TensorBoard + backup + NaN guard.
* `StopOnInterrupt`: Ctrl-C stops `train` between two steps (a SIGINT handler sets a flag).
* `indexed_batches(batch_fn, ...)`: a resumable `tf.data` pipeline whose element
  `i` depends only on `(seed, i)`.

Modules, one concept each: `compile`, `strategies` (tf.distribute, precision),
`backup` (the backup callback), `standard_callbacks` (timer, TensorBoard,
defaults), `interrupt` (Ctrl-C between steps), `data` (resumable datasets), `keras_patches` (every use of Keras
internals, version-guarded; the multi-worker ones only inside `train`) and
`loop` (`train`). Everything but `compile` needs TensorFlow.
"""

from keras_tfm.backend import tensorflow_available as _tensorflow_available
from keras_tfm.training.compile import compile_for_classification, compile_for_lm

__all__ = [
    "AtomicBackupAndRestore",
    "StepTimer",
    "StopOnInterrupt",
    "TimeBudget",
    "TrainResult",
    "compile_for_classification",
    "compile_for_lm",
    "default_callbacks",
    "distribution_strategy",
    "indexed_batches",
    "is_chief",
    "set_precision",
    "train",
]

if _tensorflow_available():
    from keras_tfm.training.backup import AtomicBackupAndRestore
    from keras_tfm.training.data import indexed_batches
    from keras_tfm.training.interrupt import StopOnInterrupt
    from keras_tfm.training.loop import TrainResult, train
    from keras_tfm.training.standard_callbacks import StepTimer, TimeBudget, default_callbacks
    from keras_tfm.training.strategies import distribution_strategy, is_chief, set_precision
