"""Small layers used by the model builders: mask-aware sequence pooling and a
bias-only layer. (The weight-tied output projection is
`TokenAndPositionEmbedding(..., reverse=True)`.)
"""

import keras
from keras import ops

from keras_tfm.checks import check_choice, check_positive_int
from keras_tfm.layers.attention.masks import merge_masks

POOLINGS = ("cls", "mean", "max")


@keras.saving.register_keras_serializable(package="keras_tfm")
class SequencePooling(keras.layers.Layer):
    """Pools `(batch, length, d)` hidden states to `(batch, d)`.

        "cls":  h[:, 0]
        "mean": Σ_t m_t h_t / max(Σ_t m_t, 1)
        "max":  max_{t: m_t = 1} h_t           (0 for a sequence with no token)

    with `m` the padding mask (1 = real token), so padding never changes the
    result of "mean" or "max".

    Call arguments:
        inputs: `(batch, length, d)`.
        padding_mask: optional `(batch, length)` bool/int mask; without it every
            position counts (unless a Keras implicit mask is attached).
    """

    def __init__(self, mode: str = "cls", **kwargs):
        super().__init__(**kwargs)
        self.mode = check_choice("pooling", mode, POOLINGS)
        self.supports_masking = True

    def call(self, inputs, padding_mask=None, mask=None, inputs_mask=None):
        if self.mode == "cls":
            return inputs[:, 0, :]
        implicit = inputs_mask if inputs_mask is not None else mask
        m = merge_masks(padding_mask, implicit)
        if m is None:
            return ops.mean(inputs, axis=1) if self.mode == "mean" else ops.max(inputs, axis=1)
        m = ops.cast(m, inputs.dtype)[:, :, None]
        if self.mode == "mean":
            total = ops.sum(inputs * m, axis=1)
            return total / ops.maximum(ops.sum(m, axis=1), ops.cast(1.0, inputs.dtype))
        very_negative = ops.cast(-1e4 if inputs.dtype == "float16" else -1e9, inputs.dtype)
        pooled = ops.max(ops.where(m > 0, inputs, very_negative), axis=1)
        any_token = ops.sum(m, axis=1) > 0
        return ops.where(any_token, pooled, ops.zeros_like(pooled))

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs, padding_mask=None, **kwargs):
        return keras.KerasTensor((inputs.shape[0], inputs.shape[2]), dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"mode": self.mode})
        return config


@keras.saving.register_keras_serializable(package="keras_tfm")
class Bias(keras.layers.Layer):
    """Adds a learned bias vector over the last axis: y = x + b (float32 output).

    Used for BERT's masked-LM output bias (`cls.predictions.bias`) after the
    tied projection.
    """

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.supports_masking = True

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.units:
            raise ValueError(f"`inputs` last dimension must be {self.units}; received {tuple(input_shape)}.")
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        return ops.cast(inputs, "float32") + ops.cast(self.bias, "float32")

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units})
        return config
