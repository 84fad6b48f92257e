"""2-D sinusoidal positional encoding for a grid of image patches."""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_positive_float, check_positive_int
from keras_tfm.layers.positional_encoding import sinusoidal_table


def sinusoidal_table_2d(rows: int, cols: int, dim: int, max_wavelength: float = 10000.0) -> Any:
    """float32 `(rows · cols, dim)` table, row-major over the grid.

        PE2D(r, c) = [ PE_{dim/2}(r) , PE_{dim/2}(c) ]

    the first half of the channels is the 1-D sinusoidal encoding
    (`sinusoidal_table`) of the row, the second half that of the column.
    `dim` must be even.
    """
    rows = check_positive_int("rows", rows)
    cols = check_positive_int("cols", cols)
    dim = check_positive_int("dim", dim)
    if dim % 2:
        raise ValueError(f"A 2-D positional encoding needs an even width; received d_model={dim}.")
    half = dim // 2
    row_table = sinusoidal_table(ops.arange(rows, dtype="float32"), half, max_wavelength)  # (R, d/2)
    col_table = sinusoidal_table(ops.arange(cols, dtype="float32"), half, max_wavelength)  # (C, d/2)
    row_part = ops.broadcast_to(row_table[:, None, :], (rows, cols, half))
    col_part = ops.broadcast_to(col_table[None, :, :], (rows, cols, half))
    return ops.reshape(ops.concatenate([row_part, col_part], axis=-1), (rows * cols, dim))


@keras.saving.register_keras_serializable(package="keras_tfm")
class PositionalEncoding2D(keras.layers.Layer):
    """Adds a fixed 2-D sinusoidal encoding to patch tokens.

        output[b, r·C + c] = x[b, r·C + c] + [PE(r) , PE(c)]      (each of width d/2)

    Args:
        grid_size: (rows, cols) of the patch grid, for inputs `(B, rows·cols, d)`.
            None: inputs must be grids `(B, rows, cols, d)`.
        num_prefix_tokens: tokens before the patches (e.g. 1 for [CLS]) that
            get no encoding.
        max_wavelength: base of the wavelengths (10000).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(B, num_prefix_tokens + rows·cols, d)` or `(B, rows, cols, d)`; d even.

    Returns:
        Same shape and dtype as `inputs`.
    """

    def __init__(
        self,
        grid_size: tuple[int, int] | None = None,
        num_prefix_tokens: int = 0,
        max_wavelength: float = 10000.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if grid_size is not None:
            if not isinstance(grid_size, (tuple, list)) or len(grid_size) != 2:
                raise ValueError(f"`grid_size` must be a pair (rows, cols) or None; received {grid_size!r}.")
            grid_size = tuple(check_positive_int("grid_size", g) for g in grid_size)
        self.grid_size = grid_size
        if (
            isinstance(num_prefix_tokens, bool)
            or not isinstance(num_prefix_tokens, int)
            or num_prefix_tokens < 0
        ):
            raise ValueError(f"`num_prefix_tokens` must be an int >= 0; received {num_prefix_tokens!r}.")
        self.num_prefix_tokens = num_prefix_tokens
        self.max_wavelength = check_positive_float("max_wavelength", max_wavelength)
        self.supports_masking = True

    def build(self, input_shape):
        d = input_shape[-1]
        if d is None or d % 2:
            raise ValueError(
                f"`inputs` last dimension must be known and even; received shape {tuple(input_shape)}."
            )
        if len(input_shape) == 4:
            if self.num_prefix_tokens:
                raise ValueError("`num_prefix_tokens` needs sequence inputs (batch, length, d), not grids.")
        elif len(input_shape) == 3:
            if self.grid_size is None:
                raise ValueError("Sequence inputs (batch, length, d) need `grid_size=(rows, cols)`.")
            n = self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1]
            if input_shape[1] is not None and input_shape[1] != n:
                raise ValueError(
                    f"`inputs` length {input_shape[1]} != num_prefix_tokens + rows·cols = {n} "
                    f"(grid_size={self.grid_size})."
                )
        else:
            raise ValueError(f"`inputs` must have rank 3 or 4; received shape {tuple(input_shape)}.")

    def encoding(self, rows: int, cols: int, dim: int) -> Any:
        return sinusoidal_table_2d(rows, cols, dim, self.max_wavelength)

    def call(self, inputs: Any):
        d = inputs.shape[-1]
        if len(inputs.shape) == 4:
            rows, cols = inputs.shape[1], inputs.shape[2]
            table = ops.reshape(self.encoding(rows, cols, d), (rows, cols, d))
            return inputs + ops.cast(table, inputs.dtype)[None]
        rows, cols = self.grid_size
        table = self.encoding(rows, cols, d)
        if self.num_prefix_tokens:
            table = ops.concatenate([ops.zeros((self.num_prefix_tokens, d), "float32"), table], axis=0)
        return inputs + ops.cast(table, inputs.dtype)[None]

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "grid_size": None if self.grid_size is None else list(self.grid_size),
                "num_prefix_tokens": self.num_prefix_tokens,
                "max_wavelength": self.max_wavelength,
            }
        )
        return config
