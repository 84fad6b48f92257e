"""Token-level metrics: padding-aware accuracy and perplexity."""

import math

import keras
from keras import ops

from keras_tfm.losses import broadcast_weight, keras_mask

__all__ = [
    "MaskedAccuracy",
    "perplexity",
]


@keras.saving.register_keras_serializable(package="keras_tfm")
class MaskedAccuracy(keras.metrics.Metric):
    """Token accuracy over the non-padding positions, accumulated over batches.

        w_i   = [y_i ≠ ignore_index] · sample_weight_i · keras_mask_i
        acc   = Σ_i w_i · [argmax_v y_pred_i[v] = y_i] / Σ_i w_i   (0 if Σ w = 0)

    Sums are accumulated in two float32 state variables (`total`, `count`)
    across `update_state` calls until `reset_state`.

    Args:
        ignore_index: label value excluded from the metric (int), or None.
        name: metric name.
        dtype: dtype of the result (state is float32 by default).

    Call arguments (`update_state`):
        y_true: integer labels `[batch, seq]` (or `[batch, seq, 1]`).
        y_pred: logits or probabilities `[batch, seq, V]`.
        sample_weight: optional per-token or per-sequence weights.
    """

    def __init__(self, ignore_index=0, name="masked_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)
        if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
            raise TypeError(f"`ignore_index` must be an int or None; received {ignore_index!r}.")
        self.ignore_index = ignore_index
        self.total = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        in_mask = keras_mask(y_pred)
        y_pred = ops.convert_to_tensor(y_pred)
        rank = len(y_pred.shape) - 1
        y_true = ops.convert_to_tensor(y_true)
        if len(y_true.shape) == rank + 1:
            y_true = ops.squeeze(y_true, axis=-1)
        labels = ops.cast(y_true, "int32")
        predictions = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        correct = ops.cast(ops.equal(labels, predictions), "float32")
        if self.ignore_index is None:
            weights = ops.ones_like(correct)
        else:
            weights = ops.cast(ops.not_equal(labels, self.ignore_index), "float32")
        if sample_weight is not None:
            weights = weights * broadcast_weight(sample_weight, rank)
        if in_mask is not None:
            weights = weights * broadcast_weight(in_mask, rank)
        self.total.assign_add(ops.sum(correct * weights))
        self.count.assign_add(ops.sum(weights))

    def result(self):
        return ops.cast(ops.divide_no_nan(self.total, self.count), self.dtype)

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config.update({"ignore_index": self.ignore_index})
        return config


def perplexity(loss):
    """Perplexity from a mean per-token cross-entropy (in nats).

        PPL = exp(loss)

    Args:
        loss: mean token negative log-likelihood in nats, e.g. the value of
            `MaskedSparseCategoricalCrossentropy` without label smoothing
            (a smoothed loss overestimates the NLL). Python number, NumPy
            value or tensor.

    Returns:
        Python float for a Python number; otherwise a float32 tensor.
    """
    if isinstance(loss, (int, float)) and not isinstance(loss, bool):
        try:
            return math.exp(loss)
        except OverflowError:
            return math.inf
    return ops.exp(ops.cast(loss, "float32"))
