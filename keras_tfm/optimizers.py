"""Optimizer factories for Transformer training.

* `vaswani_adam`: Adam(β1=0.9, β2=0.98, ε=1e-9) driven by `TransformerSchedule`,
  as in "Attention Is All You Need".
* `adamw` / `AdamW`: decoupled weight decay (Loshchilov & Hutter) that skips
  biases, normalization scales/offsets and embeddings, with the exclusion
  list kept in the optimizer config so it survives `.keras` save/load.
"""

import math
import re

import keras

from keras_tfm.checks import check_choice, check_learning_rate
from keras_tfm.schedules import TransformerSchedule

__all__ = [
    "AdamW",
    "adamw",
    "keras_optimizer_names",
    "optimizer_by_name",
    "vaswani_adam",
]

#: Short variable names (the last component of a variable's path) that
#: `AdamW` excludes from weight decay by default: Dense/attention biases,
#: LayerNormalization ``gamma``/``beta``, RMSNormalization ``scale`` and
#: embedding tables (``embeddings``).
DEFAULT_NO_DECAY_NAMES = ("bias", "gamma", "beta", "scale", "embeddings")


def vaswani_adam(d_model, warmup_steps=4000, scale=1.0, **kwargs):
    """Adam with the Transformer schedule of Vaswani et al. (2017).

        lr(step) = scale · d_model^-0.5 · min((step+1)^-0.5, (step+1) · warmup_steps^-1.5)
        Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9

    Args:
        d_model: model width; positive int.
        warmup_steps: warmup steps of the schedule; positive int.
        scale: multiplier on the schedule; positive float.
        **kwargs: passed to `keras.optimizers.Adam` (e.g. `clipnorm`,
            `global_clipnorm`, `gradient_accumulation_steps`, `use_ema`,
            `name`). `beta_1`, `beta_2` and `epsilon` may be overridden here;
            `learning_rate` may not.

    Returns:
        A `keras.optimizers.Adam` whose `learning_rate` is a
        `TransformerSchedule`.
    """
    if "learning_rate" in kwargs:
        raise TypeError(
            "`learning_rate` cannot be passed to `vaswani_adam`: it is the `TransformerSchedule` "
            "built from `d_model`, `warmup_steps` and `scale`."
        )
    schedule = TransformerSchedule(d_model, warmup_steps=warmup_steps, scale=scale)
    params = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9}
    params.update(kwargs)
    return keras.optimizers.Adam(learning_rate=schedule, **params)


def _exact_name_patterns(names):
    # `exclude_from_weight_decay` joins the strings with "|" into a regex that
    # is searched in the variable's name: "bias" for a Keras variable, but
    # "dense/bias:0" for the tf.Variable the TF backend hands to the weight-decay
    # step. Match the last path component exactly, with an optional ":N".
    return [f"(?:^|/){re.escape(n)}(?::\\d+)?$" for n in names]


@keras.saving.register_keras_serializable(package="keras_tfm")
class AdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` that skips some variables' weight decay by name.

        θ ← θ − lr · (m̂ / (√v̂ + ε) + λ · θ · [name(θ) ∉ no_decay_names])

    A variable is excluded when its short name (the last component of its
    path, e.g. ``"bias"`` for ``"dense/bias"``) equals one of
    `no_decay_names` exactly (``"bias"`` excludes ``"dense/bias"`` but not
    ``"dense/bias_scale"``).
    Unlike calling `optimizer.exclude_from_weight_decay(...)` on a stock
    `keras.optimizers.AdamW`, the list is part of `get_config`, so a model
    saved to `.keras` and loaded keeps the same exclusions. (Calling
    `exclude_from_weight_decay` yourself replaces them, and is not saved.)

    Args:
        learning_rate: float or `LearningRateSchedule`.
        weight_decay: decoupled weight-decay coefficient λ; float >= 0.
        no_decay_names: iterable of variable names excluded from decay.
        **kwargs: other `keras.optimizers.AdamW` arguments (`beta_1`,
            `beta_2`, `epsilon`, `amsgrad`, `clipnorm`, `global_clipnorm`,
            `gradient_accumulation_steps`, ...).
    """

    def __init__(
        self, learning_rate=0.001, weight_decay=0.1, no_decay_names=DEFAULT_NO_DECAY_NAMES, **kwargs
    ):
        if isinstance(no_decay_names, str):
            raise TypeError(
                f"`no_decay_names` must be a list of str, not a single str; received {no_decay_names!r}."
            )
        no_decay_names = list(no_decay_names or [])
        for name in no_decay_names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"`no_decay_names` must contain non-empty str; received {name!r}.")
        super().__init__(learning_rate=learning_rate, weight_decay=weight_decay, **kwargs)
        self.no_decay_names = no_decay_names
        if no_decay_names:
            self.exclude_from_weight_decay(var_names=_exact_name_patterns(no_decay_names))

    def get_config(self):
        config = super().get_config()
        config["no_decay_names"] = list(self.no_decay_names)
        return config


def adamw(
    learning_rate,
    weight_decay=0.1,
    beta_1=0.9,
    beta_2=0.99,
    epsilon=1e-8,
    no_decay_names=DEFAULT_NO_DECAY_NAMES,
    **kwargs,
):
    """AdamW with decoupled weight decay on weight matrices only.

        m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
        θ ← θ − lr · (m̂ / (√v̂ + ε) + λ · θ)   (λ = 0 for `no_decay_names`)

    Biases, LayerNorm ``gamma``/``beta``, RMSNorm ``scale`` and
    ``embeddings`` tables are not decayed by default (see
    `DEFAULT_NO_DECAY_NAMES`).

    Args:
        learning_rate: positive float or `keras.optimizers.schedules.LearningRateSchedule`
            (e.g. `keras_tfm.schedules.nanogpt_schedule(...)`).
        weight_decay: decoupled weight-decay coefficient λ; float >= 0.
        beta_1: first-moment decay; float in [0, 1).
        beta_2: second-moment decay; float in [0, 1).
        epsilon: numerical-stability constant; float > 0.
        no_decay_names: short variable names (last path component, e.g. "bias") excluded from decay.
        **kwargs: other `keras.optimizers.AdamW` arguments (`clipnorm`,
            `global_clipnorm`, `gradient_accumulation_steps`, `name`, ...).

    Returns:
        A `keras_tfm.optimizers.AdamW` (a registered `keras.optimizers.AdamW`).
    """
    if not isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)):
            raise TypeError(
                f"`learning_rate` must be a positive float or a LearningRateSchedule; received {learning_rate!r}."
            )
        if not (learning_rate > 0 and math.isfinite(learning_rate)):
            raise ValueError(f"`learning_rate` must be a positive float; received {learning_rate}.")
    for name, value in (("weight_decay", weight_decay),):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"`{name}` must be a float >= 0; received {value!r}.")
    for name, value in (("beta_1", beta_1), ("beta_2", beta_2)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"`{name}` must be a float in [0, 1); received {value!r}.")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon > 0:
        raise ValueError(f"`epsilon` must be a float > 0; received {epsilon!r}.")
    return AdamW(
        learning_rate=learning_rate,
        weight_decay=float(weight_decay),
        beta_1=float(beta_1),
        beta_2=float(beta_2),
        epsilon=float(epsilon),
        no_decay_names=no_decay_names,
        **kwargs,
    )


def keras_optimizer_names():
    """Lower-case names of the optimizers `keras.optimizers.get` builds ("adam", "sgd", ...)."""
    names = []
    for attr in dir(keras.optimizers):
        obj = getattr(keras.optimizers, attr)
        if (
            isinstance(obj, type)
            and issubclass(obj, keras.optimizers.Optimizer)
            and obj not in (keras.optimizers.Optimizer, keras.optimizers.LossScaleOptimizer)
        ):
            names.append(attr.lower())
    return sorted(set(names))


def optimizer_by_name(name, learning_rate):
    """A Keras optimizer from its name ("adam", "sgd", ...; "adamw" is `keras_tfm.optimizers.adamw`).

    Args:
        name: an optimizer name; unknown names raise a ValueError listing the choices.
        learning_rate: a finite positive float or a `LearningRateSchedule`
            (NaN, zero and negative rates are refused).
    """
    learning_rate = check_learning_rate("learning_rate", learning_rate)
    if name == "adamw":
        return adamw(learning_rate)
    if name not in keras_optimizer_names():  # "vaswani" is resolved by `training.compile_for_lm`
        check_choice("optimizer", name, keras_optimizer_names() + ["vaswani"])
    return keras.optimizers.get({"class_name": name, "config": {"learning_rate": learning_rate}})
