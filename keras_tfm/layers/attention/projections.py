"""The linear maps of multi-head attention, Q = X W^Q, K = X W^K, V = X W^V and
output = Concat(heads) W^O, with a fast path for plain float kernels.

The projections are `keras.layers.EinsumDense` sublayers laid out as in
`keras.layers.MultiHeadAttention` (kernels `(d, heads, dim)` and
`(heads, dim, d)`), so weights transfer one to one. When every layer involved
is a plain float `EinsumDense` (`is_plain_float`), its call is exactly
`x · kernel + bias`, and the fast path reads the kernels:

  * `fused_head_projection`: the kernels are concatenated along their output
    axis, so self-attention computes Q, K and V with a single
    `(batch·length, d) × (d, 3·heads·dim)` product (and its gradient with two
    more), instead of three einsums whose kernel gradients TensorFlow computes
    per batch element and then sums;
  * `project_output`: one 2-D matmul.

Otherwise (after `quantize`, `enable_lora`, or with a quantized dtype policy)
each layer is CALLED, so whatever Keras puts in its call path (int8/float8
kernels and their scales, LoRA) applies.
"""

from collections.abc import Sequence
from typing import Any

import keras
from keras import ops


def is_plain_float(layer: keras.layers.Layer) -> bool:
    """Whether `layer` is a plain float `EinsumDense` whose call is exactly
    `x · kernel + bias`: no quantization, no LoRA, no quantized dtype policy,
    no subclass. Only then may its kernel be read and fused."""
    return (
        type(layer) is keras.layers.EinsumDense
        and layer.quantization_mode is None
        and not layer.lora_enabled
        and type(layer.dtype_policy) is keras.dtype_policies.DTypePolicy
    )


def fused_head_projection(x: Any, layers: Sequence[keras.layers.Layer], use_bias: bool) -> list:
    """`x` `(batch, length, d)` through plain float head projections as ONE matmul
    with the concatenated kernels (module docstring); `(batch, length, heads,
    dim)` per layer."""
    d = x.shape[-1]
    kernel = ops.concatenate(
        [ops.reshape(ops.cast(layer.kernel, x.dtype), (d, -1)) for layer in layers], axis=1
    )
    batch, length = ops.shape(x)[0], ops.shape(x)[1]
    y = ops.matmul(ops.reshape(x, (-1, d)), kernel)
    if use_bias:
        y = y + ops.concatenate(
            [ops.reshape(ops.cast(layer.bias, y.dtype), (-1,)) for layer in layers], axis=0
        )
    outputs, start = [], 0
    for layer in layers:
        _, heads, dim = layer.kernel.shape
        outputs.append(ops.reshape(y[:, start : start + heads * dim], (batch, length, heads, dim)))
        start += heads * dim
    return outputs


def project_heads(x: Any, layers: Sequence[keras.layers.Layer], use_bias: bool) -> list:
    """Projects `x` `(batch, length, d)` to heads with one or more of the
    query/key/value layers: the fused matmul when all are plain float
    (`fused_head_projection`), else each layer called.

    Returns:
        list of `(batch, length, heads, dim)` tensors, one per layer.
    """
    if not all(is_plain_float(layer) for layer in layers):
        return [layer(x) for layer in layers]
    return fused_head_projection(x, layers, use_bias)


def project_output(heads: Any, layer: keras.layers.Layer, use_bias: bool) -> Any:
    """Concat(heads) W^O: `(batch, length, heads, dim)` → `(batch, length,
    output_dim)`; one 2-D matmul for a plain float output layer, else the
    layer's own call."""
    if not is_plain_float(layer):
        return layer(heads)
    h, k, d = layer.kernel.shape
    batch, length = ops.shape(heads)[0], ops.shape(heads)[1]
    y = ops.matmul(
        ops.reshape(heads, (-1, h * k)), ops.reshape(ops.cast(layer.kernel, heads.dtype), (h * k, d))
    )
    if use_bias:
        y = y + ops.cast(layer.bias, y.dtype)
    return ops.reshape(y, (batch, length, d))
