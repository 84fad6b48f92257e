"""A learning-rate schedule evaluated over the training steps, and its curve."""

import os
from collections.abc import Callable

import numpy as np

from keras_tfm.analysis.plotting.figure import new_figure, save_png
from keras_tfm.checks import check_positive_int


def learning_rates(schedule: Callable | float, steps: int) -> np.ndarray:
    """The learning rate at steps 0..steps-1 (float64 array)."""
    steps = check_positive_int("steps", steps)
    if isinstance(schedule, (int, float)) and not isinstance(schedule, bool):
        return np.full((steps,), float(schedule))
    if not callable(schedule):
        raise ValueError(
            f"`schedule` must be a LearningRateSchedule, a callable step -> lr, or a number; received {schedule!r}."
        )
    import keras

    try:  # most schedules are elementwise: evaluate all steps at once
        values = schedule(keras.ops.arange(steps, dtype="float32"))
        values = np.asarray(keras.ops.convert_to_numpy(values), dtype=np.float64)
        if values.shape == (steps,):
            return values
    except Exception:  # noqa: BLE001 - scalar-only schedule (e.g. with a cond)
        pass
    import tensorflow as tf

    @tf.function
    def evaluate(all_steps):
        return tf.map_fn(lambda s: tf.cast(schedule(s), tf.float32), all_steps)

    return evaluate(tf.range(steps, dtype=tf.float32)).numpy().astype(np.float64)


def plot_lr_schedule(
    schedule: Callable | float, steps: int, path: str | os.PathLike = "lr_schedule.png"
) -> str:
    """The learning rate of `schedule` over `steps` training steps."""
    lr = learning_rates(schedule, steps)
    fig = new_figure((8, 4))
    ax = fig.subplots()
    ax.plot(np.arange(len(lr)), lr)
    peak = int(np.argmax(lr))
    ax.plot([peak], [lr[peak]], "o", color="C3")
    ax.annotate(
        f"peak {lr[peak]:.3g} at step {peak}", (peak, lr[peak]), textcoords="offset points", xytext=(8, -12)
    )
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.set_title(type(schedule).__name__ if not isinstance(schedule, (int, float)) else "constant")
    ax.grid(alpha=0.3)
    return save_png(fig, path)
