"""Sinusoidal positional encoding of Vaswani et al. (2017)."""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_choice, check_positive_float
from keras_tfm.tensor_checks import check_float_dtype, check_rank


def inverse_frequencies(dim: int, max_wavelength: float, dtype: str = "float32") -> Any:
    """θ_i = w^(−2i/d), i = 0 … ⌈d/2⌉ − 1: the frequencies of the sinusoidal
    encoding and of RoPE, in `dtype`."""
    i = ops.arange((dim + 1) // 2, dtype=dtype)
    return ops.power(ops.cast(max_wavelength, dtype), -2.0 * i / float(dim))


#: Column layouts of the sinusoid: the paper's interleaved (sin, cos) pairs, or Marian's
#: halves (every sine first, then every cosine).
SINUSOID_LAYOUTS = ("interleaved", "halves")


def sinusoidal_table(
    positions: Any, dim: int, max_wavelength: float = 10000.0, layout: str = "interleaved"
) -> Any:
    """PE(p, 2i) = sin(p / w^(2i/d)), PE(p, 2i+1) = cos(p / w^(2i/d)), float32.

    Args:
        positions: 1-D tensor of (possibly fractional) positions.
        dim: encoding width `d` (may be odd; the last cosine column is dropped).
        max_wavelength: `w`, 10000 in the paper.
        layout: "interleaved" (the paper's column order) or "halves" (Marian /
            OPUS-MT: columns `0 … ⌈d/2⌉-1` hold sin(p / w^(2i/d)) and columns
            `⌈d/2⌉ …` hold cos(p / w^(2i/d)), the same numbers reordered).

    Returns:
        float32 tensor `(len(positions), dim)`; even columns hold sines and odd
        columns cosines, interleaved exactly as in the paper (or in halves).
    """
    layout = check_choice("layout", layout, SINUSOID_LAYOUTS)
    # Angles in float64: in float32, p·θ_i alone is off by up to ~1e-4 rad at
    # p ≈ 4000 (float32 spacing there is 2.4e-4); only the result is float32.
    positions = ops.cast(positions, "float64")
    half = (dim + 1) // 2
    angles = positions[:, None] * inverse_frequencies(dim, max_wavelength, "float64")[None, :]
    if layout == "halves":
        return ops.cast(ops.concatenate([ops.sin(angles), ops.cos(angles)[:, : dim // 2]], axis=1), "float32")
    table = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)  # (T, half, 2)
    table = ops.reshape(table, (-1, 2 * half))
    return ops.cast(table[:, :dim], "float32")


class GeometricWavelengths(keras.layers.Layer):
    """Base of the shape-preserving layers that encode positions with the
    frequencies θ_i = w^(−2i/d) (`inverse_frequencies`): `PositionalEncoding`
    adds sin/cos(p·θ_i), `RotaryEmbedding` rotates feature pairs by p·θ_i.

    Args:
        max_wavelength: the base `w` (10000 in both papers).
        **kwargs: standard `keras.layers.Layer` arguments.
    """

    def __init__(self, max_wavelength: float = 10000.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = check_positive_float("max_wavelength", max_wavelength)
        self.supports_masking = True
        # No weights, and a symbolic call may not reach them: built now (`model.quantize`
        # refuses unbuilt layers).
        self.built = True

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config


@keras.saving.register_keras_serializable(package="keras_tfm")
class PositionalEncoding(GeometricWavelengths):
    """Adds the fixed sinusoidal positional encoding to a sequence of vectors.

        PE(p, 2i)   = sin(p / 10000^(2i/d_model))
        PE(p, 2i+1) = cos(p / 10000^(2i/d_model))
        output      = x + PE[start : start + T]

    The table is computed on the fly (angles in float64, table in float32), so
    it works for any length with no fixed maximum, and is cast to the compute
    dtype only when added.

    Args:
        max_wavelength: the base `10000` of the geometric wavelength progression.
        layout: "interleaved" (the paper) or "halves" (Marian: every sine column,
            then every cosine column; `sinusoidal_table`).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, length, d_model)` float tensor.
        start_index: int or scalar tensor, position of the first element
            (non-zero during incremental decoding). Defaults to 0.
        positions: optional int `(batch, length)` position of every element
            (per-row offsets in cached decoding); replaces `start_index`.

    Returns:
        `inputs + PE`, same shape and dtype as `inputs`.
    """

    def __init__(self, max_wavelength: float = 10000.0, layout: str = "interleaved", **kwargs):
        super().__init__(max_wavelength, **kwargs)
        self.layout = check_choice("layout", layout, SINUSOID_LAYOUTS)

    def encoding(self, length: Any, dim: int, start_index: Any = 0) -> Any:
        """The float32 `(length, dim)` table for positions start..start+length-1."""
        positions = ops.arange(length, dtype="float32") + ops.cast(start_index, "float32")
        return sinusoidal_table(positions, dim, self.max_wavelength, self.layout)

    def call(self, inputs: Any, start_index: Any = 0, positions: Any = None):
        check_rank("inputs", inputs, 3)
        check_float_dtype("inputs", inputs)
        shape = ops.shape(inputs)
        if positions is not None:
            flat = ops.reshape(ops.maximum(ops.cast(positions, "int32"), 0), (-1,))
            table = ops.reshape(
                sinusoidal_table(flat, inputs.shape[-1], self.max_wavelength, self.layout), shape
            )
            return inputs + ops.cast(table, inputs.dtype)
        table = self.encoding(shape[1], inputs.shape[-1], start_index)
        return inputs + ops.cast(table, inputs.dtype)[None, :, :]

    def get_config(self):
        config = super().get_config()
        config.update({"layout": self.layout})
        return config
