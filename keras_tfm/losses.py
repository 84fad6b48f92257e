"""Token-level losses for language modelling and sequence-to-sequence training."""

import keras
from keras import ops

from keras_tfm.tensor_checks import check_token_ids, poison_invalid

__all__ = [
    "MaskedSparseCategoricalCrossentropy",
    "sparse_categorical_crossentropy_per_token",
]

_REDUCTIONS = ("sum_over_batch_size", "mean", "mean_with_sample_weight", "sum", "none", None)
_MEAN_REDUCTIONS = ("sum_over_batch_size", "mean", "mean_with_sample_weight")


def keras_mask(x):
    """The Keras mask attached to `x` (e.g. by `Embedding(mask_zero=True)`), or None."""
    try:
        from keras.src.backend import get_keras_mask
    except ImportError:  # pragma: no cover - older/newer private layout
        return getattr(x, "_keras_mask", None)
    return get_keras_mask(x)


def _scale_loss_for_distribution(value):
    """Keras convention: under `tf.distribute` each replica returns loss / num_replicas."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if num_replicas > 1:
            value = value * (1.0 / num_replicas)
    return value


def broadcast_weight(weight, rank):
    """Brings a per-sequence `[batch]` or `[batch, seq, 1]` weight to `rank`."""
    weight = ops.cast(weight, "float32")
    w_rank = len(weight.shape)
    if w_rank == rank + 1 and weight.shape[-1] == 1:
        weight = ops.squeeze(weight, axis=-1)
    while len(weight.shape) < rank:
        weight = ops.expand_dims(weight, axis=-1)
    return weight


def sparse_categorical_crossentropy_per_token(y_true, y_pred, from_logits=True, label_smoothing=0.0):
    """Per-position (label-smoothed) cross-entropy, computed in float32.

        log p   = log_softmax(logits)                      (from_logits=True)
                = log(clip(p / Σ p, ε, 1 − ε))             (from_logits=False, ε = 1e-7)
        ℓ       = −(1 − α) · log p[y] − α/V · Σ_v log p[v]

    i.e. the cross-entropy against the smoothed target `(1 − α)·onehot(y) + α/V`
    (Keras `CategoricalCrossentropy(label_smoothing=α)` on one-hot labels).

    Args:
        y_true: integer labels `[...]` (or `[..., 1]`); every value must be a
            valid class id in `[0, V)`.
        y_pred: logits (or probabilities) `[..., V]`, any float dtype.
        from_logits: whether `y_pred` are logits.
        label_smoothing: α in [0, 1).

    Returns:
        float32 tensor with the shape of `y_true` (without a trailing 1).
    """
    y_pred = ops.cast(y_pred, "float32")
    y_true = ops.convert_to_tensor(y_true)
    if len(y_true.shape) == len(y_pred.shape):
        y_true = ops.squeeze(y_true, axis=-1)
    labels = ops.cast(y_true, "int32")
    if from_logits:
        log_probs = ops.log_softmax(y_pred, axis=-1)
    else:
        eps = keras.backend.epsilon()
        probs = y_pred / ops.sum(y_pred, axis=-1, keepdims=True)
        log_probs = ops.log(ops.clip(probs, eps, 1.0 - eps))
    nll = -ops.squeeze(ops.take_along_axis(log_probs, labels[..., None], axis=-1), axis=-1)
    if label_smoothing:
        smooth = -ops.mean(log_probs, axis=-1)
        return (1.0 - label_smoothing) * nll + label_smoothing * smooth
    return nll


@keras.saving.register_keras_serializable(package="keras_tfm")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Sparse cross-entropy averaged over the real (non-padding) tokens.

    Per token `i` with label `y_i`, vocabulary size `V` and smoothing `α`:

        log p_i = log_softmax(float32(logits_i))
        ℓ_i     = −(1 − α) · log p_i[y_i] − (α / V) · Σ_v log p_i[v]
        w_i     = [y_i ≠ ignore_index] · sample_weight_i · keras_mask_i

    and the returned value, by `reduction`:

        "sum_over_batch_size" | "mean" | "mean_with_sample_weight":
                    L = Σ_i w_i · ℓ_i / Σ_i w_i      (0 when Σ_i w_i = 0)
        "sum":      L = Σ_i w_i · ℓ_i
        "none"/None: w_i · ℓ_i per position (0 at ignored positions)

    So the default is the mean over the non-ignored tokens, *not* over all
    `batch · seq` positions (stock Keras divides by the number of positions
    when `sample_weight` is given). With MLM-style weights (1 on the masked
    positions, 0 elsewhere) it is the mean over the masked positions; with
    general weights it is the weighted mean. `sample_weight` may be per token
    (`[batch, seq]` or `[batch, seq, 1]`) or per sequence (`[batch]`); the
    mask that Keras attaches to `y_pred` (e.g. from
    `Embedding(mask_zero=True)`) is honoured as well. Under `tf.distribute`
    the value is divided by the number of replicas, as every Keras loss is,
    so the summed gradient is the mean over replicas of per-replica token
    means.

    Logits are cast to float32 before a `log_softmax`, so float16/bfloat16
    logits (mixed precision) are safe; the result is always float32.
    Labels equal to `ignore_index` may be out of the vocabulary range
    (e.g. -100); they are never gathered. Every other label must lie in
    `[0, V)`: eagerly a bad label raises a ValueError naming `y_true`, in
    `tf.function` an InvalidArgumentError with the same message, and under
    XLA (which drops assertions) its loss is NaN, so a bad batch can never
    produce a plausible loss (`tensor_checks.check_token_ids`).

    Args:
        from_logits: whether `y_pred` are logits (default) or probabilities.
        label_smoothing: α in [0, 1); the target becomes (1 − α) on the label
            plus α/V on every class.
        ignore_index: label value excluded from the loss (int), or None to
            keep every position.
        reduction: one of "sum_over_batch_size" (default), "mean",
            "mean_with_sample_weight" (all three: weighted token mean), "sum",
            "none" or None.
        name: loss name.
    """

    def __init__(
        self,
        from_logits=True,
        label_smoothing=0.0,
        ignore_index=0,
        reduction="sum_over_batch_size",
        name="masked_sparse_categorical_crossentropy",
        **kwargs,
    ):
        if reduction not in _REDUCTIONS:
            raise ValueError(f"`reduction` must be one of {list(_REDUCTIONS)}; received {reduction!r}.")
        super().__init__(name=name, reduction=reduction, **kwargs)
        if not isinstance(from_logits, bool):
            raise TypeError(f"`from_logits` must be a bool; received {from_logits!r}.")
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)):
            raise TypeError(f"`label_smoothing` must be a float in [0, 1); received {label_smoothing!r}.")
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(f"`label_smoothing` must be a float in [0, 1); received {label_smoothing}.")
        if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
            raise TypeError(f"`ignore_index` must be an int or None; received {ignore_index!r}.")
        self.from_logits = from_logits
        self.label_smoothing = float(label_smoothing)
        self.ignore_index = ignore_index

    def _labels_and_valid(self, y_true, rank):
        y_true = ops.convert_to_tensor(y_true)
        if len(y_true.shape) == rank + 1:
            y_true = ops.squeeze(y_true, axis=-1)
        labels = ops.cast(y_true, "int32")
        if self.ignore_index is None:
            return labels, None
        valid = ops.not_equal(labels, self.ignore_index)
        return ops.where(valid, labels, ops.zeros_like(labels)), valid

    def call(self, y_true, y_pred):
        """Per-position loss `ℓ_i` (0 where the label is `ignore_index`, NaN where it is out of range), float32."""
        rank = len(y_pred.shape) - 1
        labels, valid = self._labels_and_valid(y_true, rank)
        in_range = None
        if y_pred.shape[-1] is not None:
            labels, in_range = check_token_ids("y_true", labels, y_pred.shape[-1])
        losses = sparse_categorical_crossentropy_per_token(
            labels, y_pred, from_logits=self.from_logits, label_smoothing=self.label_smoothing
        )
        if valid is not None:
            losses = ops.where(valid, losses, ops.zeros_like(losses))
        return poison_invalid(losses, in_range)

    def __call__(self, y_true, y_pred, sample_weight=None):
        """Computes the reduced loss (see the class docstring for the formula).

        Args:
            y_true: integer labels `[batch, seq]` (or `[batch, seq, 1]`; any
                leading shape works).
            y_pred: logits or probabilities `[batch, seq, V]`, any float dtype.
            sample_weight: optional weights, per token or per sequence.

        Returns:
            float32 scalar (or per-position tensor for reduction "none"/None).
        """
        in_mask = keras_mask(y_pred)
        with keras.name_scope(self.name):
            y_pred = ops.convert_to_tensor(y_pred)
            rank = len(y_pred.shape) - 1
            losses = self.call(y_true, y_pred)
            _, valid = self._labels_and_valid(y_true, rank)
            weights = ops.ones_like(losses) if valid is None else ops.cast(valid, "float32")
            if sample_weight is not None:
                weights = weights * broadcast_weight(sample_weight, rank)
            if in_mask is not None:
                weights = weights * broadcast_weight(in_mask, rank)
            weighted = losses * weights
            if self.reduction is None or self.reduction == "none":
                return weighted
            total = ops.sum(weighted)
            if self.reduction == "sum":
                return total
            return _scale_loss_for_distribution(ops.divide_no_nan(total, ops.sum(weights)))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "from_logits": self.from_logits,
                "label_smoothing": self.label_smoothing,
                "ignore_index": self.ignore_index,
            }
        )
        return config
