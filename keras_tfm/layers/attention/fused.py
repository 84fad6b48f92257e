"""The backend's own attention kernel: `attention_impl="fused"`.

`keras.ops.dot_product_attention`: cuDNN flash attention on a GPU under JAX
(float16/bfloat16), PyTorch's `scaled_dot_product_attention`, XLA elsewhere.
"auto" calls it on a JAX GPU (`fused_kernel_available`).
"""

from typing import Any

import keras
from keras import ops

from keras_tfm.layers.attention.core import AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.lengths import static_or_dynamic_length
from keras_tfm.layers.attention.masks import expand_mask, score_mask
from keras_tfm.layers.attention.toeplitz_bias import expand_bias


def fused_kernel_available(query: Any, value: Any, bias: Any) -> bool:
    """Whether "auto" should call the backend's fused kernel: JAX on a GPU with
    float16/bfloat16 inputs (cuDNN flash attention), no score bias, equal
    key/value head sizes."""
    if keras.backend.backend() != "jax" or bias is not None or value.shape[-1] != query.shape[-1]:
        return False
    if keras.backend.standardize_dtype(query.dtype) not in ("float16", "bfloat16"):
        return False
    import jax  # the backend in use

    return jax.devices()[0].platform == "gpu"


@register_attention_impl("fused")
def fused_attention(inputs: AttentionInputs, flash_attention: bool | None = None) -> tuple[Any, None]:
    """The backend kernel, with the contract of the core (a query with no
    visible key gets a zero output), without weights or weight dropout;
    `flash_attention` is passed on (None: the backend decides)."""
    inputs.refuse_weights("fused")
    query, key, value = inputs[:3]
    mask, bias, causal = inputs.mask, inputs.bias, inputs.causal
    mask4 = None if mask is None else expand_mask(mask)
    bias4 = None if bias is None else expand_bias(bias, static_or_dynamic_length(key))
    output = ops.dot_product_attention(
        query,
        key,
        value,
        bias=None if bias4 is None else ops.cast(bias4, query.dtype),
        mask=mask4,
        scale=inputs.scale,
        is_causal=causal,
        flash_attention=flash_attention,
    )
    if mask4 is not None:
        visible = mask4
        if causal:
            causal4 = score_mask(None, True, static_or_dynamic_length(query), static_or_dynamic_length(key))
            visible = ops.logical_and(visible, causal4)
        row_visible = ops.any(visible, axis=-1, keepdims=True)  # (B|1, H|1, Tq, 1)
        output = output * ops.cast(ops.transpose(row_visible, (0, 2, 1, 3)), output.dtype)
    return output, None
