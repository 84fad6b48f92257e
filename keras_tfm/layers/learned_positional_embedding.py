"""Learned absolute position embeddings (BERT, GPT-2)."""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_positive_int
from keras_tfm.tensor_checks import check_length, check_rank


@keras.saving.register_keras_serializable(package="keras_tfm")
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Adds a trainable vector per position: output = x + P[start : start + T].

    Args:
        max_length: the largest sequence length the table covers; a longer
            input raises a `ValueError`.
        initializer: initializer of the `(max_length, d_model)` table.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, length, d_model)` float tensor.
        start_index: int or scalar tensor, position of the first element.
        positions: optional int `(batch, length)` position of every element
            (e.g. per-row offsets of left-padded prompts in cached decoding);
            replaces `start_index`. Positions are clipped to
            `[0, max_length - 1]`.

    Returns:
        `inputs + P[start:start+length]` (or `inputs + P[positions]`), same
        shape as `inputs`.
    """

    def __init__(self, max_length: int, initializer: Any = "glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.max_length = check_positive_int("max_length", max_length)
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                f"`inputs` must have rank 3 (batch, length, d_model) with a known d_model; received {input_shape}."
            )
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, input_shape[-1]),
            initializer=self.initializer,
        )

    def call(self, inputs: Any, start_index: Any = 0, positions: Any = None):
        check_rank("inputs", inputs, 3)
        if positions is not None:
            positions = ops.clip(ops.cast(positions, "int32"), 0, self.max_length - 1)
            table = ops.take(ops.convert_to_tensor(self.position_embeddings), positions, axis=0)
            return inputs + ops.cast(table, inputs.dtype)
        # A static length raises a ValueError here; a dynamic one an assertion naming `inputs`.
        dyn_length = check_length("inputs", ops.shape(inputs)[1], self.max_length, start_index)
        table = ops.slice(
            ops.convert_to_tensor(self.position_embeddings),
            (ops.cast(start_index, "int32"), 0),
            (dyn_length, inputs.shape[-1]),
        )
        return inputs + ops.cast(table, inputs.dtype)[None, :, :]

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
