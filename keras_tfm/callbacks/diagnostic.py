"""The shared base of keras_tfm's diagnostic callbacks and their probe batches.

`DiagnosticCallback` counts global training steps, keeps `records`, copies the
last values into the epoch logs and writes TensorBoard scalars (`log_dir`);
`unpack_probe` reads a probe batch from a tuple or the first batch of a
`tf.data.Dataset`.
"""

import os
import sys
from typing import Any

import keras

from keras_tfm.backend import require_tensorflow
from keras_tfm.checks import check_positive_int


def unpack_probe(probe_data: Any, name: str = "probe_data") -> tuple[Any, Any, Any]:
    """(x, y, sample_weight) from a tuple, or the first batch of a tf.data.Dataset."""
    tf = sys.modules.get("tensorflow")  # a tf.data.Dataset implies TensorFlow is loaded
    if tf is not None and isinstance(probe_data, tf.data.Dataset):
        probe_data = next(iter(probe_data))
    if not isinstance(probe_data, (tuple, list)):
        return probe_data, None, None
    if len(probe_data) == 1:
        return probe_data[0], None, None
    if len(probe_data) == 2:
        return probe_data[0], probe_data[1], None
    if len(probe_data) == 3:
        return tuple(probe_data)
    raise ValueError(
        f"`{name}` must be x, (x, y) or (x, y, sample_weight); received a sequence of {len(probe_data)}."
    )


class DiagnosticCallback(keras.callbacks.Callback):
    """Shared logic: global step counter, TensorBoard writer, records."""

    def __init__(self, log_dir: str | os.PathLike | None = None, every_n_steps: int | None = None):
        super().__init__()
        self.log_dir = None if log_dir is None else str(log_dir)
        self.every_n_steps = check_positive_int("every_n_steps", every_n_steps, allow_none=True)
        self.records = []
        self.step = 0
        self._writer = None
        self._last = {}

    def _write(self, values, step):
        if self.log_dir is None:
            return
        tf = require_tensorflow(f"{type(self).__name__}(log_dir=...) (TensorBoard scalars)")
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        with self._writer.as_default():
            for name, value in values.items():
                tf.summary.scalar(name, float(value), step=int(step))

    def _record(self, values, step, logs=None):
        values = {k: float(v) for k, v in values.items()}
        self.records.append((int(step), values))
        self._last = values
        self._write(values, step)
        if logs is not None:
            logs.update(values)

    def _due(self):
        return self.every_n_steps is not None and self.step % self.every_n_steps == 0

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.step += 1

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._writer is not None:
            self._writer.flush()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is not None and self._last:
            logs.update(self._last)
