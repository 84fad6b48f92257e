"""`train`: the resumable `model.fit` loop the examples and the `keras-tfm` CLI share."""

import math
import os
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from keras_tfm.training.backup import AtomicBackupAndRestore
from keras_tfm.training.data import _data_at
from keras_tfm.training.interrupt import StopOnInterrupt
from keras_tfm.training.keras_patches import multi_worker_workarounds
from keras_tfm.training.standard_callbacks import StepTimer, TimeBudget, tensorboard_callback
from keras_tfm.training.strategies import distribution_strategy, is_chief


class TrainResult:
    """What `train` returns.

    Attributes:
        model: the trained model.
        history: dict metric -> list of per-epoch values (all `fit` calls merged).
        epochs: list of epoch indices matching `history`.
        start_step: step training (re)started from (> 0 after a resume).
        steps: total steps trained by the end.
        seconds: wall time of the `fit` calls.
    """

    def __init__(
        self,
        model: keras.Model,
        history: dict[str, list[float]],
        epochs: list[int],
        start_step: int,
        steps: int,
        seconds: float,
    ):
        self.model = model
        self.history = history
        self.epochs = epochs
        self.start_step = start_step
        self.steps = steps
        self.seconds = seconds

    def __repr__(self):
        last = {k: v[-1] for k, v in self.history.items() if v}
        return f"TrainResult(steps={self.steps}, start_step={self.start_step}, seconds={self.seconds:.1f}, last={last})"


def _segments(start, total, steps_per_epoch):
    """[(first_epoch, num_epochs, steps_per_epoch, start_step)] covering [start, total)."""
    groups = []
    s = start
    while s < total:
        epoch = s // steps_per_epoch
        end = min((epoch + 1) * steps_per_epoch, total)
        n = end - s
        if (
            groups
            and groups[-1][2] == n
            and s % steps_per_epoch == 0
            and groups[-1][3] % steps_per_epoch == 0
        ):
            first, count, _, seg_start = groups[-1]
            groups[-1] = (first, count + 1, n, seg_start)
        else:
            groups.append((epoch, 1, n, s))
        s = end
    return groups


def _callbacks(callbacks, strategy, log_dir, backup_dir, save_freq, time_budget, time_budget_clock):
    """`(callbacks, backup, timer, budget)` of `train`: the user's callbacks, with an
    `AtomicBackupAndRestore` for `backup_dir`, TensorBoard for `log_dir` (the chief only),
    `TerminateOnNaN`, a `StepTimer` and a `TimeBudget`, each unless already given."""
    callbacks = list(callbacks or [])
    backup = next((c for c in callbacks if isinstance(c, AtomicBackupAndRestore)), None)
    if backup_dir and backup is None:
        backup = AtomicBackupAndRestore(backup_dir, save_freq=save_freq or "epoch")
        callbacks.append(backup)
    if (
        log_dir
        and is_chief(strategy)
        and not any(isinstance(c, keras.callbacks.TensorBoard) for c in callbacks)
    ):
        tb = tensorboard_callback(log_dir)
        if tb is not None:
            callbacks.append(tb)
    if not any(isinstance(c, keras.callbacks.TerminateOnNaN) for c in callbacks):
        callbacks.append(keras.callbacks.TerminateOnNaN())
    timer = StepTimer()
    callbacks.append(timer)
    budget = next((c for c in callbacks if isinstance(c, TimeBudget)), None)
    if time_budget is not None and budget is None:
        budget = TimeBudget(time_budget, clock=time_budget_clock)
        callbacks.append(budget)
    return callbacks, backup, timer, budget


def train(
    model: keras.Model | Callable[[], keras.Model],
    data: tf.data.Dataset | Callable[[int], tf.data.Dataset],
    *,
    steps: int,
    steps_per_epoch: int | None = None,
    validation_data: tf.data.Dataset | None = None,
    validation_steps: int | None = None,
    strategy: tf.distribute.Strategy | str | None = None,
    callbacks: Sequence[keras.callbacks.Callback] | None = None,
    log_dir: str | os.PathLike | None = None,
    backup_dir: str | os.PathLike | None = None,
    save_freq: int | None = None,
    verbose: str | int = "auto",
    time_budget: float | None = None,
    time_budget_clock: str = "wall",
) -> TrainResult:
    """Trains with `model.fit` for `steps` batches, resumably.

    Training is cut into epochs of `steps_per_epoch` batches; at the end of
    each the model is evaluated on `validation_data` (nanoGPT's
    `eval_interval`), TensorBoard scalars are written and a backup is taken.

    Args:
        model: a compiled `keras.Model`, or a zero-argument callable returning
            one (called inside `strategy.scope()` — use this form with a
            distribution strategy).
        data: an infinite (or repeatable) `tf.data.Dataset` of `(x, y)` or
            `(x, y, sample_weight)` global batches, or a callable
            `start_step -> Dataset` (e.g. built with `indexed_batches`) so a
            resumed run sees exactly the data an uninterrupted run would.
            A plain dataset is `.repeat()`ed and `.skip()`ped on resume.
        steps: total number of training batches (global steps).
        steps_per_epoch: batches per epoch (default: `steps`, one epoch).
        validation_data: dataset evaluated at each epoch end (or None).
        validation_steps: batches of `validation_data` per evaluation
            (None: the whole dataset, which must then be finite).
        strategy: a `tf.distribute.Strategy` or a name for
            `distribution_strategy` (default: the current strategy).
        callbacks: extra Keras callbacks.
        log_dir: TensorBoard folder (None: no TensorBoard).
        backup_dir: `AtomicBackupAndRestore` folder (None: no backups). When a
            backup exists, training resumes from its step.
        save_freq: backup every this many batches (default: each epoch).
        verbose: passed to `fit` (the Keras progress bar by default).
        time_budget: seconds of wall time after which training stops early
            (`TimeBudget`, also taken from `callbacks`; None: train all `steps`). `steps` still sets the
            epochs and the step count of the returned result is the one
            reached.
        time_budget_clock: "wall" or "process" (CPU seconds of this process;
            see `TimeBudget`).

    Ctrl-C (SIGINT, in the main thread) stops training at the end of the step in progress with a
    `KeyboardInterrupt` saying the step reached and the backup that resumes the run
    (`keras_tfm.training.interrupt.StopOnInterrupt`).

    Returns:
        A `TrainResult`.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"`steps` must be a positive int; received {steps!r}.")
    steps_per_epoch = steps if steps_per_epoch is None else int(steps_per_epoch)
    if steps_per_epoch <= 0:
        raise ValueError(f"`steps_per_epoch` must be a positive int; received {steps_per_epoch!r}.")
    if isinstance(strategy, str):
        strategy = distribution_strategy(strategy)
    strategy = strategy or tf.distribute.get_strategy()
    if not isinstance(model, keras.Model):
        with strategy.scope():
            model = model()
    if not isinstance(model, keras.Model):
        raise TypeError(f"`model` must be a keras.Model or a factory returning one; got {type(model)}.")
    if model.optimizer is None:
        raise ValueError("`model` must be compiled before `train`.")

    callbacks, backup, timer, budget = _callbacks(
        callbacks, strategy, log_dir, backup_dir, save_freq, time_budget, time_budget_clock
    )

    start = 0
    if backup is not None:
        with strategy.scope():
            start = backup.restore(model)
        if start > steps:
            raise ValueError(
                f"Cannot resume: the backup in {backup.backup_dir!r} is at step {start}, beyond `steps`={steps} "
                "(--steps). Pass steps >= the backup's step, or another backup folder."
            )
        if start == steps:  # the run had already finished: nothing to train
            return TrainResult(model, {}, [], start, start, 0.0)

    history, epochs = {}, []
    interrupt = StopOnInterrupt(steps, backup)  # last: after the backup of the same step
    callbacks.append(interrupt)
    # Ctrl-C stops between two steps (training.interrupt). Keras workarounds (multi-worker only), undone
    # when training ends: see keras_patches.
    with interrupt.handling_sigint(), multi_worker_workarounds(model, strategy):
        for first_epoch, num_epochs, spe, seg_start in _segments(start, steps, steps_per_epoch):
            if backup is not None:
                backup.begin_segment(seg_start, first_epoch, spe, steps)
            h = model.fit(
                _data_at(data, seg_start),
                initial_epoch=first_epoch,
                epochs=first_epoch + num_epochs,
                steps_per_epoch=spe,
                validation_data=validation_data,
                validation_steps=validation_steps,
                callbacks=callbacks,
                verbose=verbose,
                shuffle=False,
            )
            for key, values in h.history.items():
                history.setdefault(key, []).extend(float(v) for v in values)
            epochs.extend(h.epoch)
            if budget is not None and budget.reached:
                break
    reached = steps
    if budget is not None and budget.reached:
        # optimizer updates x batches per update = the batches trained (the last partial update not counted)
        reached = int(model.optimizer.iterations.numpy()) * (model.optimizer.gradient_accumulation_steps or 1)
    return TrainResult(model, history, epochs, start, reached, timer.seconds)


def num_epochs(steps, steps_per_epoch):
    """ceil(steps / steps_per_epoch)."""
    return math.ceil(steps / steps_per_epoch)
