"""Ctrl-C during `train`: the signal sets a flag, and training stops between two steps.

Python runs a signal handler in the main thread between two bytecodes, wherever that thread is.
Python's own SIGINT handler raises `KeyboardInterrupt` there, and where that is a garbage-collector
callback (JAX registers one), a `__del__` or a library's `except Exception`, the exception is printed
as "Exception ignored" or swallowed, and training goes on. So while `StopOnInterrupt.handling_sigint`
is active, SIGINT only sets `requested`; the callback checks it after every training and validation
batch and at every epoch end, and raises `KeyboardInterrupt` there: the step in progress ends, the
backups already written stay (`AtomicBackupAndRestore`), and the exception leaves `fit` and `train`
as before. A second Ctrl-C before the next check raises `KeyboardInterrupt` at once (for a step that
never ends).

The handler is installed only from the main thread and only over Python's default SIGINT handler
(`signal.default_int_handler`); a program that handles SIGINT itself keeps its handler.
"""

import contextlib
import signal
import threading

import keras


class StopOnInterrupt(keras.callbacks.Callback):
    """Raises `KeyboardInterrupt` at the first batch or epoch end after a Ctrl-C (`handling_sigint`).

    Args:
        total_steps: the steps of the run (named in the message).
        backup: the run's `AtomicBackupAndRestore`, or None (the message says where to resume from).

    Attributes:
        requested: whether a SIGINT arrived while `handling_sigint` was active.
    """

    def __init__(self, total_steps: int | None = None, backup=None):
        super().__init__()
        self.requested = False
        self.total_steps = total_steps
        self.backup = backup

    def _on_sigint(self, signum, frame):
        if self.requested:  # a second Ctrl-C: at once, wherever Python is
            raise KeyboardInterrupt
        self.requested = True

    @contextlib.contextmanager
    def handling_sigint(self):
        """Within the block, SIGINT sets `requested` instead of raising (module docstring); the previous
        handler is restored afterwards. Outside the main thread, or when SIGINT has a handler other than
        Python's default, nothing changes."""
        if (
            threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        ):
            yield
            return
        signal.signal(signal.SIGINT, self._on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def step(self) -> int:
        """The global step reached: the optimizer's updates × the batches of one update."""
        optimizer = self.model.optimizer
        return int(optimizer.iterations.numpy()) * (optimizer.gradient_accumulation_steps or 1)

    def message(self) -> str:
        """Where training stopped and where it can resume from."""
        of = f" of {self.total_steps}" if self.total_steps else ""
        text = f"training stopped between two steps, after step {self.step()}{of}"
        if self.backup is not None and self.backup.last_saved_step:
            text += (
                f"; the backup in {str(self.backup.backup_dir)!r} (step {self.backup.last_saved_step}) "
                "resumes the run"
            )
        return text

    def _check(self):
        if self.requested:
            self.requested = False  # raised once; a later fit starts clean
            raise KeyboardInterrupt(self.message())

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._check()

    def on_test_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._check()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._check()


__all__ = ["StopOnInterrupt"]
