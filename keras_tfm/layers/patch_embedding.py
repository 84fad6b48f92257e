"""Vision tokens: image patches → vectors (ViT, Dosovitskiy et al. 2021) and the
learnable [CLS] token."""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_positive_int
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.tensor_checks import check_rank


def as_pair(name, value):
    """`value` as an int pair `(height, width)`: an int n is `(n, n)`; an error names `name`."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"`{name}` must be an int or a pair (height, width); received {value!r}.")
        return tuple(check_positive_int(name, v) for v in value)
    v = check_positive_int(name, value)
    return (v, v)


@keras.saving.register_keras_serializable(package="keras_tfm")
class PatchEmbedding(keras.layers.Layer):
    """Splits images into non-overlapping P×P patches and projects each to d_model.

        x_n = flatten(patch_n) W + b,     n = row · (W_img / P) + col

    implemented as a Conv2D with kernel = stride = P ("valid" padding), which
    is exactly a Dense layer on flattened patches.

    Args:
        patch_size: int or (height, width) of a patch.
        d_model: output width.
        use_bias: bias of the projection.
        kernel_initializer, bias_initializer: of the projection.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: images `(batch, height, width, channels)` (channels last);
            height and width must be multiples of the patch size.

    Returns:
        `(batch, num_patches, d_model)` patch tokens in row-major order, with
        `num_patches = (height / P_h) · (width / P_w)`; `grid_size(...)` gives
        `(rows, cols)`.
    """

    def __init__(
        self,
        patch_size: int | tuple[int, int],
        d_model: int,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.patch_size = as_pair("patch_size", patch_size)
        self.d_model = check_positive_int("d_model", d_model)
        self.use_bias = check_bool("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def grid_size(self, image_shape: tuple) -> tuple[int, int]:
        """(rows, cols) of patches for an image shape (…, height, width, channels)."""
        height, width = image_shape[-3], image_shape[-2]
        for axis, size, p in (("height", height, self.patch_size[0]), ("width", width, self.patch_size[1])):
            if size is not None and size % p:
                raise ValueError(
                    f"Image {axis} {size} is not a multiple of `patch_size` {self.patch_size}; resize or pad the images."
                )
        return (
            None if height is None else height // self.patch_size[0],
            None if width is None else width // self.patch_size[1],
        )

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                f"`inputs` must be images (batch, height, width, channels); received shape {tuple(input_shape)}."
            )
        self.grid_size(input_shape)
        self.projection = keras.layers.Conv2D(
            self.d_model,
            kernel_size=self.patch_size,
            strides=self.patch_size,
            padding="valid",
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer, "projection"),
            bias_initializer=clone_initializer(self.bias_initializer, "projection"),
            dtype=self.dtype_policy,
            name="projection",
        )
        self.projection.build(input_shape)

    def call(self, inputs: Any):
        check_rank("inputs", inputs, 4)
        x = self.projection(inputs)  # (B, rows, cols, d)
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1] * shape[2], self.d_model))

    def compute_output_shape(self, input_shape):
        rows, cols = self.grid_size(input_shape)
        n = None if rows is None or cols is None else rows * cols
        return (input_shape[0], n, self.d_model)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "patch_size": list(self.patch_size),
                "d_model": self.d_model,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_tfm")
class ClassToken(keras.layers.Layer):
    """Prepends a learnable [CLS] vector to a sequence: (B, N, d) → (B, N + 1, d).

    Args:
        initializer: of the `(d,)` token (zeros, as in ViT).
        **kwargs: standard `keras.layers.Layer` arguments.
    """

    def __init__(self, initializer: Any = "zeros", **kwargs):
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                f"`inputs` must have shape (batch, length, d) with known d; received {tuple(input_shape)}."
            )
        self.token = self.add_weight(name="token", shape=(input_shape[-1],), initializer=self.initializer)

    def call(self, inputs: Any):
        check_rank("inputs", inputs, 3)
        batch = ops.shape(inputs)[0]
        cls = ops.broadcast_to(
            ops.cast(self.token, inputs.dtype)[None, None, :], (batch, 1, inputs.shape[-1])
        )
        return ops.concatenate([cls, inputs], axis=1)

    def compute_output_shape(self, input_shape):
        n = None if input_shape[1] is None else input_shape[1] + 1
        return (input_shape[0], n, input_shape[2])

    def get_config(self):
        config = super().get_config()
        config.update({"initializer": keras.initializers.serialize(self.initializer)})
        return config
