"""The callbacks `train` and the examples add: a step timer, TensorBoard (when installed), backup, NaN guard."""

import os
import time

import keras

from keras_tfm.training.backup import AtomicBackupAndRestore
from keras_tfm.training.strategies import is_chief


class StepTimer(keras.callbacks.Callback):
    """Records wall time of the training (`seconds`) and of each epoch (`epoch_seconds`)."""

    def __init__(self):
        super().__init__()
        self.seconds = 0.0
        self.epoch_seconds = []
        self._t0 = self._te = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._t0 = time.perf_counter()

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._te = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch_seconds.append(time.perf_counter() - self._te)

    def on_train_end(self, logs: dict | None = None) -> None:
        self.seconds += time.perf_counter() - self._t0


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `seconds` of wall time have passed since the first `fit` began.

    Checked after every training batch (every compiled call with
    `steps_per_execution`), so the run ends within one step of the budget;
    the epoch in progress still gets its validation. Comparing two set-ups
    "at equal wall time" is one budget given to both.

    `clock="process"` counts the CPU seconds of this process (all its
    threads) instead: on a shared machine, two runs pinned to one core each
    and given the same process budget get the same compute, which is what
    "equal wall time" means on a quiet machine.

    Args:
        seconds: positive budget.
        clock: "wall" (`time.perf_counter`) or "process" (`time.process_time`).

    Attributes:
        reached: whether the budget stopped training.
    """

    CLOCKS = {"wall": time.perf_counter, "process": time.process_time}

    def __init__(self, seconds: float, clock: str = "wall"):
        super().__init__()
        from keras_tfm.checks import check_choice, check_float

        self.seconds = check_float("seconds", seconds, low=0, low_open=True)
        self.clock = check_choice("clock", clock, tuple(self.CLOCKS))
        self._now = self.CLOCKS[clock]
        self.reached = False
        self._t0 = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self._t0 is None:  # `train` calls fit once per segment: one budget for all of them
            self._t0 = self._now()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self._now() - self._t0 >= self.seconds:
            self.reached = True
            self.model.stop_training = True


def tensorboard_available() -> bool:
    """Whether the `tensorboard` package (needed by `keras.callbacks.TensorBoard`) is installed."""
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


def tensorboard_callback(log_dir: str | os.PathLike) -> keras.callbacks.TensorBoard | None:
    """`keras.callbacks.TensorBoard(log_dir)` (epoch scalars), or None with a warning without `tensorboard`."""
    if not tensorboard_available():
        import warnings

        warnings.warn(
            "`tensorboard` is not installed (pip install tensorboard): no TensorBoard logs are written.",
            stacklevel=2,
        )
        return None
    return keras.callbacks.TensorBoard(log_dir=log_dir, write_graph=False, update_freq="epoch")


def default_callbacks(
    log_dir: str | os.PathLike | None = None,
    backup_dir: str | os.PathLike | None = None,
    save_freq: str | int = "epoch",
    terminate_on_nan: bool = True,
) -> list[keras.callbacks.Callback]:
    """The callbacks the examples use.

    Args:
        log_dir: TensorBoard folder (`keras.callbacks.TensorBoard`, epoch
            scalars); None for none. Only the chief writes under multi-worker.
        backup_dir: folder for `AtomicBackupAndRestore`; None for none.
        save_freq: backup frequency ("epoch" or a number of batches).
        terminate_on_nan: add `keras.callbacks.TerminateOnNaN`.

    Returns:
        A list of callbacks (the backup one, when present, is an
        `AtomicBackupAndRestore`).
    """
    callbacks = []
    if backup_dir:
        callbacks.append(AtomicBackupAndRestore(backup_dir, save_freq=save_freq))
    if log_dir and is_chief():
        tb = tensorboard_callback(log_dir)
        if tb is not None:
            callbacks.append(tb)
    if terminate_on_nan:
        callbacks.append(keras.callbacks.TerminateOnNaN())
    return callbacks
