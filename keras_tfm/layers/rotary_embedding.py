"""Rotary position embedding (RoPE, Su et al. 2021), applied to queries and keys."""

from typing import Any

import keras
from keras import ops

from keras_tfm.layers.positional_encoding import GeometricWavelengths, inverse_frequencies
from keras_tfm.tensor_checks import check_rank


@keras.saving.register_keras_serializable(package="keras_tfm")
class RotaryEmbedding(GeometricWavelengths):
    """Rotates each pair of feature dimensions by a position-dependent angle.

        θ_i = w^(-2i/d),  R(p) rotates (x_i, x_{i+d/2}) by the angle p·θ_i
        RoPE(x, p) = x ⊙ cos(pθ) + rotate_half(x) ⊙ sin(pθ)

    Because R(p)ᵀR(s) = R(s − p), the score q_pᵀ k_s after rotation depends only
    on the offset s − p. Angles are computed in float32. Uses the "rotate half"
    pairing (GPT-NeoX / LLaMA), so the feature dimension must be even.

    Args:
        max_wavelength: the base `w`, 10000 by default.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, length, num_heads, key_dim)` queries or keys.
        start_index: int or scalar tensor, position of the first element.

    Returns:
        The rotated tensor, same shape and dtype as `inputs`.
    """

    def call(self, inputs: Any, start_index: Any = 0):
        check_rank("inputs", inputs, 4)
        dim = inputs.shape[-1]
        if dim is not None and dim % 2:
            raise ValueError(f"RotaryEmbedding needs an even head dimension; received {dim}.")
        length = ops.shape(inputs)[1]
        positions = ops.arange(length, dtype="float32") + ops.cast(start_index, "float32")
        angles = positions[:, None] * inverse_frequencies(dim, self.max_wavelength)[None, :]  # (T, d/2)
        angles = ops.concatenate([angles, angles], axis=-1)[None, :, None, :]
        cos = ops.cast(ops.cos(angles), inputs.dtype)
        sin = ops.cast(ops.sin(angles), inputs.dtype)
        x1, x2 = ops.split(inputs, 2, axis=-1)
        rotated = ops.concatenate([-x2, x1], axis=-1)
        return inputs * cos + rotated * sin
