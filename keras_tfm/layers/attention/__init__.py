"""Attention, the heart of the Transformer.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + B + M) V
    MultiHead(X_q, X_kv) = Concat(head_1, …, head_H) W^O,
        head_h = Attention(X_q W_h^Q, X_kv W_h^K, X_kv W_h^V)

Read in this order:
    self_attention.py, cross_attention.py
                        the layers: projections, positions, then
    multi_head.py       `_compute_attention` → `dot_product_attention` of
    dot_product.py      the formula (scores → float32 softmax → · V) and the named
                        fast paths it hands a call to: one query (`decoding.py`),
                        long keys (`chunked.py`), a JAX GPU (`fused.py`)
    core.py             the contract (layouts, masks, biases, causal) and the
                        registry of implementations chosen by name
    reference.py        the formula, as it reads (autodiff); every implementation
                        is tested against it
    masks.py            boolean masks, True = may attend
    toeplitz_bias.py    score biases B, dense or stored in O(T)
    offset_bias.py, alibi.py, relative_position_bias.py
                        the position biases (functions of key − query)
Implementations and their pieces:
    chunked.py, block_plan.py, row_blocks.py, lengths.py
                        exact attention in O(T) memory
    fused.py            the backend's kernel (cuDNN flash attention on JAX GPUs)
    local.py, linear.py sliding window; kernelized linear attention
    projections.py      Q, K, V in one matmul for plain float kernels
    decoding.py         the key/value cache and the single-query step
"""

# Importing the implementations registers them in ATTENTION_IMPLS.
from keras_tfm.layers.attention import chunked, dot_product, fused, linear, local, reference  # noqa: F401
from keras_tfm.layers.attention.alibi import AlibiBias, alibi_slopes
from keras_tfm.layers.attention.core import ATTENTION_IMPLS, AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.cross_attention import CrossAttention
from keras_tfm.layers.attention.dot_product import dot_product_attention, key_length_bound
from keras_tfm.layers.attention.masks import causal_mask, merge_masks
from keras_tfm.layers.attention.multi_head import ATTENTION_POSITIONS, MultiHeadAttentionBase
from keras_tfm.layers.attention.offset_bias import OffsetBias
from keras_tfm.layers.attention.reference import attention_weights, reference_attention
from keras_tfm.layers.attention.relative_position_bias import RelativePositionBias, relative_position_bucket
from keras_tfm.layers.attention.self_attention import MultiHeadSelfAttention
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias

__all__ = [
    "ATTENTION_IMPLS",
    "ATTENTION_POSITIONS",
    "AlibiBias",
    "AttentionInputs",
    "CrossAttention",
    "MultiHeadAttentionBase",
    "MultiHeadSelfAttention",
    "OffsetBias",
    "RelativePositionBias",
    "ToeplitzBias",
    "alibi_slopes",
    "attention_weights",
    "causal_mask",
    "dot_product_attention",
    "key_length_bound",
    "merge_masks",
    "reference_attention",
    "register_attention_impl",
    "relative_position_bucket",
]
