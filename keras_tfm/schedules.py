"""Learning-rate schedules for Transformer training.

* `TransformerSchedule`: the inverse-square-root schedule with linear warmup of
  "Attention Is All You Need" (Vaswani et al. 2017, eq. 3).
* `nanogpt_schedule`: linear warmup then cosine decay to a floor, as in
  nanoGPT, built from Keras's own `CosineDecay`.
* `WarmupStableDecay`: linear warmup, a constant plateau, then a linear decay
  to a floor over the last steps ("WSD" or trapezoidal schedule).
* `LinearWarmup`: linear warmup to a constant rate (the fine-tuning default of
  the task models' `compile`, when the run length is not known).
"""

import math

import keras
from keras import ops

from keras_tfm.checks import check_closed_rate, check_positive_int

__all__ = [
    "LinearWarmup",
    "TransformerSchedule",
    "WarmupStableDecay",
    "nanogpt_schedule",
]


def _check_positive_float(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a positive float; received {value!r} ({type(value).__name__}).")
    if not (float(value) > 0.0 and math.isfinite(float(value))):
        raise ValueError(f"`{name}` must be a positive finite float; received {value}.")
    return float(value)


def _check_warmup_steps(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`warmup_steps` must be an int >= 0; received {value!r}.")
    if value < 0:
        raise ValueError(f"`warmup_steps` must be an int >= 0; received {value}.")
    return value


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
    warmup_steps = _check_warmup_steps(warmup_steps)
    if decay_steps <= warmup_steps:
        raise ValueError(
            f"`decay_steps` must be greater than `warmup_steps` ({warmup_steps}); received {decay_steps}."
        )
    min_ratio = check_closed_rate("min_ratio", min_ratio)
    if warmup_steps == 0:
        return keras.optimizers.schedules.CosineDecay(
            initial_learning_rate=learning_rate, decay_steps=decay_steps, alpha=min_ratio
        )
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=decay_steps - warmup_steps,
        alpha=min_ratio,
        warmup_target=learning_rate,
        warmup_steps=warmup_steps,
    )


@keras.saving.register_keras_serializable(package="keras_tfm")
class WarmupStableDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Warmup–stable–decay ("trapezoidal") learning rate.

        step < warmup_steps:                 lr = peak · step / warmup_steps
        warmup_steps <= step < decay_start:  lr = peak
        decay_start <= step < total_steps:   lr = peak + (min_lr − peak) · (step − decay_start) / decay_steps
        step >= total_steps:                 lr = min_lr
        with decay_start = total_steps − decay_steps, min_lr = min_ratio · peak

    The rate stays at its peak for most of the run and is annealed only at the
    end (Zhai et al. 2022; Hägele et al. 2024, "Scaling Laws and
    Compute-Optimal Training Beyond Fixed Training Durations"). For a short,
    undertrained run such as the Tiny Shakespeare lab (2000 steps) this spends
    far more steps at the peak than a cosine decay of the same peak and floor,
    which lowers the final validation loss (measured in `bench/RESULTS.md`).
    The warmup starts at 0, like `nanogpt_schedule`. All math is float32.

    Args:
        learning_rate: peak learning rate; positive float.
        total_steps: step at which the floor is reached (the run length);
            positive int.
        warmup_steps: linear warmup steps; int >= 0.
        decay_steps: length of the final linear decay; positive int with
            `warmup_steps + decay_steps <= total_steps`. Default:
            `decay_fraction · total_steps`, shortened to
            `total_steps − warmup_steps` if it would reach into the warmup
            (at least 1).
        decay_fraction: used when `decay_steps` is None; float in (0, 1].
        min_ratio: floor as a fraction of `learning_rate`; float in [0, 1].

    Returns:
        Calling the schedule with `step` (int or float scalar, Python value or
        tensor, e.g. `optimizer.iterations`; or a 1-D tensor of steps) returns
        float32 rates.
    """

    def __init__(
        self, learning_rate, total_steps, warmup_steps=0, decay_steps=None, decay_fraction=0.2, min_ratio=0.1
    ):
        super().__init__()
        self.learning_rate = _check_positive_float("learning_rate", learning_rate)
        self.total_steps = check_positive_int("total_steps", total_steps)
        self.warmup_steps = _check_warmup_steps(warmup_steps)
        self.decay_fraction = check_closed_rate("decay_fraction", decay_fraction)
        if self.decay_fraction == 0.0:
            raise ValueError("`decay_fraction` must be in (0, 1]; received 0.")
        self.min_ratio = check_closed_rate("min_ratio", min_ratio)
        if decay_steps is None:  # the last `decay_fraction` of the run, after the warmup
            decay_steps = max(
                1, min(round(self.decay_fraction * self.total_steps), self.total_steps - self.warmup_steps)
            )
        self.decay_steps = check_positive_int("decay_steps", decay_steps)
        if self.warmup_steps + self.decay_steps > self.total_steps:
            raise ValueError(
                f"`warmup_steps` + `decay_steps` must be <= `total_steps` ({self.total_steps}); "
                f"received warmup_steps={self.warmup_steps}, decay_steps={self.decay_steps}."
            )

    def __call__(self, step):
        s = ops.cast(step, "float32")
        peak = self.learning_rate
        floor = self.min_ratio * peak
        decay_start = float(self.total_steps - self.decay_steps)
        progress = ops.clip((s - decay_start) / float(self.decay_steps), 0.0, 1.0)
        rate = peak * (1.0 - progress) + floor * progress
        if self.warmup_steps:
            rate = ops.where(s < float(self.warmup_steps), peak * s / float(self.warmup_steps), rate)
        return ops.cast(rate, "float32")

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "decay_fraction": self.decay_fraction,
            "min_ratio": self.min_ratio,
        }


@keras.saving.register_keras_serializable(package="keras_tfm")
class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to a constant rate:

        lr(step) = learning_rate · min(1, (step + 1) / warmup_steps)

    Warmup keeps the first updates of a fine-tuned model small while Adam's
    moment estimates are still noisy (the lecture's fine-tuning advice: AdamW,
    a low rate, a warmup). All math is float32.

    Args:
        learning_rate: the rate after the warmup; positive float.
        warmup_steps: steps to reach it; int >= 0 (0: constant from the start).
    """

    def __init__(self, learning_rate, warmup_steps=100):
        super().__init__()
        self.learning_rate = _check_positive_float("learning_rate", learning_rate)
        self.warmup_steps = _check_warmup_steps(warmup_steps)

    def __call__(self, step):
        if not self.warmup_steps:
            return ops.full_like(ops.cast(step, "float32"), self.learning_rate)
        progress = ops.minimum((ops.cast(step, "float32") + 1.0) / float(self.warmup_steps), 1.0)
        return ops.cast(self.learning_rate * progress, "float32")

    def get_config(self):
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps}
