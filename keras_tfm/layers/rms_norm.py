"""Root-mean-square layer normalization (Zhang & Sennrich 2019)."""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_positive_float


@keras.saving.register_keras_serializable(package="keras_tfm")
class RMSNorm(keras.layers.Layer):
    """RMS normalization over the last axis, computed in float32:

        y = x / √(mean(x²) + ε) · g

    No centring and no bias (LLaMA, T5). The statistics are computed in
    float32 under any dtype policy; the output has the compute dtype.

    Args:
        epsilon: ε added to the mean square.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(..., d)`.

    Returns:
        `(..., d)`.
    """

    def __init__(self, epsilon: float = 1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = check_positive_float("epsilon", epsilon)
        self.supports_masking = True

    def build(self, input_shape):
        if input_shape[-1] is None:
            raise ValueError("The last dimension of `inputs` must be known.")
        self.scale = self.add_weight(name="scale", shape=(input_shape[-1],), initializer="ones")

    def call(self, inputs: Any):
        x = ops.cast(inputs, "float32")
        y = x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.epsilon)
        return ops.cast(y * ops.cast(self.scale, "float32"), self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon})
        return config
