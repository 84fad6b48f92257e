"""Learning-rate schedules for Transformer training.

* `TransformerSchedule`: the inverse-square-root schedule with linear warmup of
  "Attention Is All You Need" (Vaswani et al. 2017, eq. 3).
* `nanogpt_schedule`: linear warmup then cosine decay to a floor, as in
  nanoGPT, built from Keras's own `CosineDecay`.
"""

import math

import keras
from keras import ops

from keras_tfm.layers._validation import check_positive_int


def _check_positive_float(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a positive float; received {value!r} ({type(value).__name__}).")
    if not (float(value) > 0.0 and math.isfinite(float(value))):
        raise ValueError(f"`{name}` must be a positive finite float; received {value}.")
    return float(value)


@keras.saving.register_keras_serializable(package="keras_tfm")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Inverse-square-root learning rate with linear warmup (Vaswani et al.).

        s  = step + 1
        lr = scale · d_model^-0.5 · min(s^-0.5, s · warmup_steps^-1.5)

    The `+ 1` makes the first optimizer step (Keras's `iterations == 0`) use a
    non-zero rate. The rate grows linearly for `warmup_steps` steps, peaks at
    `step = warmup_steps - 1` (where both branches equal
    `warmup_steps^-0.5`), and then decays as `s^-0.5`. All math is float32.

    Args:
        d_model: model width; positive int.
        warmup_steps: number of linear warmup steps; positive int.
        scale: positive multiplier on the whole schedule (1.0 in the paper).

    Returns:
        Calling the schedule with `step` (int or float scalar, Python value or
        tensor, e.g. `optimizer.iterations`) returns a float32 scalar tensor.
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.warmup_steps = check_positive_int("warmup_steps", warmup_steps)
        self.scale = _check_positive_float("scale", scale)

    def __call__(self, step):
        s = ops.cast(step, "float32") + 1.0
        warmup = ops.cast(self.warmup_steps, "float32")
        factor = ops.cast(self.scale * self.d_model**-0.5, "float32")
        return factor * ops.minimum(ops.rsqrt(s), s * ops.power(warmup, -1.5))

    def peak_learning_rate(self):
        """Maximum of the schedule, reached at `step = warmup_steps - 1`.

        Returns:
            Python float `scale · d_model^-0.5 · warmup_steps^-0.5`.
        """
        return self.scale * self.d_model**-0.5 * self.warmup_steps**-0.5

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


def nanogpt_schedule(learning_rate, decay_steps, warmup_steps=0, min_ratio=0.1):
    """nanoGPT-style schedule: linear warmup, cosine decay, constant floor.

        step < warmup_steps:                 lr(step) = learning_rate · step / warmup_steps
        warmup_steps <= step <= decay_steps: lr(step) = min_lr + (learning_rate − min_lr)
                                                        · ½(1 + cos(π · (step − warmup_steps)
                                                                      / (decay_steps − warmup_steps)))
        step > decay_steps:                  lr(step) = min_lr
        with min_lr = min_ratio · learning_rate.

    As in nanoGPT, `decay_steps` counts from step 0 and includes the warmup
    (nanoGPT's `lr_decay_iters`). The only difference with nanoGPT is that the
    warmup starts exactly at 0 (Keras's `CosineDecay` warmup) instead of at
    `learning_rate / (warmup_steps + 1)`.

    Args:
        learning_rate: peak learning rate; positive float.
        decay_steps: step at which the floor is reached; positive int, greater
            than `warmup_steps`.
        warmup_steps: number of linear warmup steps; int >= 0 (0: no warmup,
            the cosine starts at `learning_rate`).
        min_ratio: floor as a fraction of `learning_rate`; float in [0, 1].

    Returns:
        A `keras.optimizers.schedules.CosineDecay` (serializable with the
        optimizer without any custom object).
    """
    learning_rate = _check_positive_float("learning_rate", learning_rate)
    decay_steps = check_positive_int("decay_steps", decay_steps)
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int):
        raise TypeError(f"`warmup_steps` must be an int >= 0; received {warmup_steps!r}.")
    if warmup_steps < 0:
        raise ValueError(f"`warmup_steps` must be an int >= 0; received {warmup_steps}.")
    if decay_steps <= warmup_steps:
        raise ValueError(
            f"`decay_steps` must be greater than `warmup_steps` ({warmup_steps}); received {decay_steps}."
        )
    if isinstance(min_ratio, bool) or not isinstance(min_ratio, (int, float)):
        raise TypeError(f"`min_ratio` must be a float in [0, 1]; received {min_ratio!r}.")
    if not 0.0 <= float(min_ratio) <= 1.0:
        raise ValueError(f"`min_ratio` must be a float in [0, 1]; received {min_ratio}.")
    if warmup_steps == 0:
        return keras.optimizers.schedules.CosineDecay(
            initial_learning_rate=learning_rate, decay_steps=decay_steps, alpha=float(min_ratio)
        )
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=decay_steps - warmup_steps,
        alpha=float(min_ratio),
        warmup_target=learning_rate,
        warmup_steps=warmup_steps,
    )
